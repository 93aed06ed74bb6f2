"""Checks that rest on a heuristic hold for the problem's own reference: an honest kernel whose outputs repeat on
different inputs as the reference's do (an argmax over few choices) passes, with the replay check stood down in
the record and the feedback; the reference itself, passed through a Triton copy into a fresh tensor, passes the
output-dependence check although its own intermediates leave the right values in the allocator's blocks.
CPU mode: real kernels through the Triton interpreter."""

from __future__ import annotations

import textwrap

import pytest

from services.parent.defences import repeated_seeds
from services.problems import Problem
from services.schema import EvalOptions, EvalResult, Verdict

CPU = EvalOptions(device="cpu")

# 4 rows of 3 columns: 81 possible outputs, so the ~40 calls of a CPU evaluation repeat some bit for bit. At
# 8 rows of 12 an output rarely repeats, but a digest of sums collides on outputs with the same values in another
# order (about half of such evaluations had a collision).
ARGMAX_REFERENCE = """
import torch
import torch.nn as nn


ROWS, COLS = 4, 3


class Model(nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
"""

ARGMAX_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_argmax(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
    best = tl.max(x, axis=0)
    first = tl.min(tl.where(x == best, offs, BLOCK), axis=0)
    tl.store(out_ptr + row, first.to(tl.int64))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
        _row_argmax[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
"""

# The product of two upper-triangular matrices is upper triangular: the reference's `matmul` result, freed by
# `triu`, holds the exact output, and a fresh `empty_like` of the same size may get that block back.
TRIU_REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.triu(torch.matmul(a, b))


def get_inputs():
    return [torch.triu(torch.randn(48, 48)), torch.triu(torch.randn(48, 48))]


def get_init_inputs():
    return []
"""

# A lazy but correct candidate, appended to the reference's source: the reference's forward, its output copied
# by a one-line Triton kernel into a fresh tensor.
THROUGH_A_COPY = """
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


class ModelNew(Model):
    def forward(self, *args):
        ref = super().forward(*args).contiguous()
        out = torch.empty_like(ref)
        _copy[(triton.cdiv(ref.numel(), 1024),)](ref, out, ref.numel(), BLOCK=1024)
        return out
"""


def stood_down(result: EvalResult) -> set[str]:
    return {c.name for c in result.checks if c.stood_down}


def test_repeated_seeds_groups_calls_by_digest_in_call_order():
    digests = [(11, (1, 2)), (12, (3, 4)), (13, (1, 2)), (14, (5, 6)), (15, (3, 4)), (16, (1, 2))]
    assert repeated_seeds(digests) == [[11, 13, 16], [12, 15]]
    assert repeated_seeds([(1, (0,)), (2, (1,))]) == []


def test_an_honest_argmax_whose_outputs_repeat_like_the_references_passes(evaluator):
    problem = Problem("calibration/row_argmax", textwrap.dedent(ARGMAX_REFERENCE))
    result = evaluator.evaluate(problem, ARGMAX_CANDIDATE, CPU)
    assert result.verdict is Verdict.PASSED, result.feedback
    [check] = [c for c in result.checks if c.stood_down]
    assert check.name == "timed_output_recheck" and check.passed
    assert check.measured["repeated_outputs"] >= 1
    assert "timed_output_recheck" in result.feedback


def test_an_honest_argmax_whose_output_digests_collide_passes_every_time(evaluator):
    source = textwrap.dedent(ARGMAX_REFERENCE).replace("ROWS, COLS = 4, 3", "ROWS, COLS = 8, 12")
    verdicts = [
        evaluator.evaluate(Problem("calibration/row_argmax_8x12", source), ARGMAX_CANDIDATE, CPU) for _ in range(8)
    ]
    assert [r.verdict for r in verdicts] == [Verdict.PASSED] * 8, [r.feedback for r in verdicts]


@pytest.mark.parametrize("reference", [TRIU_REFERENCE, ARGMAX_REFERENCE], ids=["triu_matmul", "argmax"])
def test_the_reference_through_a_triton_copy_passes_output_dependence(evaluator, reference):
    problem = Problem("calibration/reference_copy", textwrap.dedent(reference))
    candidate = textwrap.dedent(reference) + THROUGH_A_COPY
    result = evaluator.evaluate(problem, candidate, EvalOptions(device="cpu", timing=False))
    assert result.verdict is Verdict.PASSED, result.feedback
    [check] = [c for c in result.checks if c.name == "output_depends_on_kernels"]
    assert check.passed and not check.stood_down
    assert check.measured["launches_neutralised"] >= 1


# Alternates between two outputs from call to call: two calls on the same inputs differ, the reference's too.
ALTERNATING_REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x if self.calls % 2 else x + 1


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
"""


def test_the_determinism_check_stands_down_where_the_reference_varies_itself(evaluator):
    problem = Problem("calibration/alternating", textwrap.dedent(ALTERNATING_REFERENCE))
    one_trial = EvalOptions(device="cpu", timing=False, correctness_trials=1)
    result = evaluator.evaluate(problem, textwrap.dedent(ALTERNATING_REFERENCE) + THROUGH_A_COPY, one_trial)
    assert result.verdict is Verdict.PASSED, result.feedback
    [check] = [c for c in result.checks if c.name == "deterministic"]
    assert check.stood_down and check.passed and check.measured["mismatched_elements"] == 64
    assert "deterministic" in result.feedback
