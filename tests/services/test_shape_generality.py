"""Shape generality is opt-in: by default a kernel specialised to the published sizes passes; a problem that sets
`shape_general = True`, or the strict policy, also checks changed sizes, and the result names them."""

from __future__ import annotations

import pytest
from helpers import bundled_source, relu_candidate

from services.problems import Problem
from services.schema import EvalOptions, Verdict

NO_TIMING = EvalOptions(device="cpu", timing=False)
STRICT = EvalOptions(device="cpu", timing=False, policy="strict")
# Right on every input of the published 64 x 1000 ReLU, wrong on any other size.
SPECIALISED = """
out = torch.empty(64, 1000, device=x.device, dtype=x.dtype)
_relu[(triton.cdiv(64000, 4096),)](x.contiguous(), out, min(x.numel(), 64000), BLOCK=4096)
return out
"""
ROW_KERNEL = """
@triton.jit
def _row_relu(x_ptr, out_ptr, COLS: tl.constexpr, BLOCK: tl.constexpr):
    tl.static_assert(COLS % 8 == 0)
    offs = tl.program_id(0) * COLS + tl.arange(0, BLOCK)
    mask = tl.arange(0, BLOCK) < COLS
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)
"""
ROW_BODY = """
out = torch.empty_like(x)
_row_relu[(x.shape[0],)](x, out, COLS=x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
return out
"""
POW2_REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


rows = 48
dim = 64
shape_general = True


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return []
"""
POW2_KERNEL = """
@triton.jit
def _softmax(x_ptr, out_ptr, DIM: tl.constexpr):
    offs = tl.program_id(0) * DIM + tl.arange(0, DIM)
    x = tl.load(x_ptr + offs)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + offs, e / tl.sum(e, axis=0))
"""
POW2_BODY = """
out = torch.empty_like(x)
_softmax[(x.shape[0],)](x, out, DIM=x.shape[1])
return out
"""


@pytest.fixture(scope="module")
def general_relu(relu) -> Problem:
    return Problem(id="general_relu", source=relu.source + "\nshape_general = True\n")


def hidden(result):
    return [c for c in result.checks if c.name == "hidden_sizes"]


def test_kernel_specialised_to_the_published_sizes_passes_by_default(evaluator, relu):
    result = evaluator.evaluate(relu, relu_candidate(SPECIALISED), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert not hidden(result)


@pytest.mark.parametrize("opt_in", ["problem", "policy"])
def test_opting_in_checks_changed_sizes_and_names_them(evaluator, relu, general_relu, opt_in):
    problem, options = (general_relu, NO_TIMING) if opt_in == "problem" else (relu, STRICT)
    result = evaluator.evaluate(problem, relu_candidate(SPECIALISED), options).result
    assert result.verdict is Verdict.INCORRECT
    [check] = hidden(result)
    assert not check.passed and "rows=32, cols=501" in check.detail
    assert "rows=32, cols=501" in result.feedback
    assert ("shape_general = True" if opt_in == "problem" else "`strict` policy") in result.feedback


def test_a_compile_error_on_changed_sizes_names_them(evaluator, general_relu):
    result = evaluator.evaluate(general_relu, relu_candidate(ROW_BODY, ROW_KERNEL), NO_TIMING).result
    assert result.verdict is Verdict.COMPILE_ERROR
    assert "rows=32, cols=501" in result.feedback and "changed" in result.feedback


def test_powers_of_two_stay_powers_of_two(evaluator):
    problem = Problem(id="pow2_softmax", source=POW2_REFERENCE)
    result = evaluator.evaluate(problem, relu_candidate(POW2_BODY, POW2_KERNEL), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback
    [check] = hidden(result)
    assert check.passed and "rows=16, dim=32" in check.detail and "rows=16, dim=16" in check.detail
    assert "rows=16, dim=32" in result.feedback


def test_honest_kernel_passes_the_changed_sizes(evaluator, general_relu):
    result = evaluator.evaluate(general_relu, bundled_source("level1/1_ReLU"), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback
    [check] = hidden(result)
    assert check.passed and "rows=32, cols=501" in check.detail and "rows=16, cols=3" in check.detail


def test_changed_sizes_the_reference_cannot_run_are_skipped(evaluator, general_relu):
    source = general_relu.source.replace("def get_inputs():\n", "def get_inputs():\n    assert rows == 64\n")
    assert source != general_relu.source
    result = evaluator.evaluate(
        Problem(id="fixed_rows", source=source), bundled_source("level1/1_ReLU"), NO_TIMING
    ).result
    assert result.verdict is Verdict.PASSED
    [check] = hidden(result)
    assert check.passed and "none applies" in check.detail
