"""Checks that rest on a heuristic hold for the problem's own reference: an honest kernel whose outputs repeat on
different inputs as the reference's do (an argmax over few choices) passes, with the replay check stood down in
the record and the feedback; the reference itself, passed through a Triton copy into a fresh tensor, passes the
output-dependence check although its own intermediates leave the right values in the allocator's blocks.
The honest kernels of bench/kernels/calibration (outputs easy to get wrong: integer and bool, a few elements, exact
zeros, values that hardly depend on the inputs, an in-place reference) and of KernelBench's level-1 problems 94-100
(at reduced sizes; skipped where .kb/KernelBench is absent, as its files are never committed) pass.
CPU mode: real kernels through the Triton interpreter."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from helpers import reduced

from services.parent.defences import repeated_seeds
from services.problems import Problem, ProblemSet
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
    result = evaluator.evaluate(problem, ARGMAX_CANDIDATE, CPU).result
    assert result.verdict is Verdict.PASSED, result.feedback
    [check] = [c for c in result.checks if c.stood_down]
    assert check.name == "timed_output_recheck" and check.passed
    assert check.measured["repeated_outputs"] >= 1
    assert "timed_output_recheck" in result.feedback


def test_an_honest_argmax_whose_output_digests_collide_passes_every_time(evaluator):
    source = textwrap.dedent(ARGMAX_REFERENCE).replace("ROWS, COLS = 4, 3", "ROWS, COLS = 8, 12")
    verdicts = [
        evaluator.evaluate(Problem("calibration/row_argmax_8x12", source), ARGMAX_CANDIDATE, CPU).result
        for _ in range(8)
    ]
    assert [r.verdict for r in verdicts] == [Verdict.PASSED] * 8, [r.feedback for r in verdicts]


# A loss whose 0-dim output shares the storage of its per-element losses (smooth_l1_loss's does), always 0, so that
# every call's output repeats and the reference re-runs on the repeating seeds. Each forward counts the tensors
# alive whose storage is input-sized: its own two inputs, and no earlier seed's output.
SHARED_STORAGE_REFERENCE = """
import gc

import torch
import torch.nn as nn

N = 1 << 14


def _large_alive():
    return sum(1 for o in gc.get_objects() if torch.is_tensor(o) and o.untyped_storage().nbytes() >= 4 * N)


class Model(nn.Module):
    def forward(self, x, y):
        alive = _large_alive()
        if alive > 2:
            raise RuntimeError(f"{alive} input-sized storages alive")
        return torch.nn.functional.smooth_l1_loss(x, y).mul_(0)


def get_inputs():
    return [torch.rand(N), torch.rand(N)]


def get_init_inputs():
    return []
"""

ZERO_LOSS_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _zero_loss(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        m = start + offs < n
        x = tl.load(x_ptr + start + offs, mask=m, other=0.0)
        acc += tl.abs(x - tl.load(y_ptr + start + offs, mask=m, other=0.0))
    tl.store(out_ptr, tl.sum(acc, axis=0) * 0.0)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty((), device=x.device, dtype=x.dtype)
        _zero_loss[(1,)](x, y, out, x.numel(), BLOCK=1024)
        return out
"""


def test_re_running_the_reference_holds_no_earlier_seeds_storage(evaluator):
    # On an H100, smooth_l1_loss's scalar output kept its 4 GiB of per-element losses alive for every repeating
    # seed the reference re-ran, and KernelBench level1/96 ran the device out of memory.
    problem = Problem("calibration/shared_storage_loss", textwrap.dedent(SHARED_STORAGE_REFERENCE))
    result = evaluator.evaluate(problem, textwrap.dedent(ZERO_LOSS_CANDIDATE), CPU).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert [c.name for c in result.checks if c.stood_down] == ["timed_output_recheck"]


@pytest.mark.parametrize("reference", [TRIU_REFERENCE, ARGMAX_REFERENCE], ids=["triu_matmul", "argmax"])
def test_the_reference_through_a_triton_copy_passes_output_dependence(evaluator, reference):
    problem = Problem("calibration/reference_copy", textwrap.dedent(reference))
    candidate = textwrap.dedent(reference) + THROUGH_A_COPY
    result = evaluator.evaluate(problem, candidate, EvalOptions(device="cpu", timing=False)).result
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
    result = evaluator.evaluate(problem, textwrap.dedent(ALTERNATING_REFERENCE) + THROUGH_A_COPY, one_trial).result
    assert result.verdict is Verdict.PASSED, result.feedback
    [check] = [c for c in result.checks if c.name == "deterministic"]
    assert check.stood_down and check.passed and check.measured["mismatched_elements"] == 64
    assert "deterministic" in result.feedback


ROOT = Path(__file__).resolve().parents[2]
CALIBRATION_PROBLEMS = ProblemSet(ROOT / "bench" / "problems" / "calibration")
CALIBRATION_KERNELS = ROOT / "bench" / "kernels" / "calibration"
KERNELBENCH = ROOT / ".kb" / "KernelBench"  # fetched, never committed
KERNELBENCH_KERNELS = ROOT / "bench" / "kernels" / "kernelbench"

# KernelBench's size globals, published -> small enough for the interpreter, and not powers of two, so the
# kernels' masks are exercised. HingeLoss broadcasts its (batch,) targets along the rows: its batch must equal its
# row length.
REDUCED_SIZES = {
    "level1/94_MSELoss": {"batch_size = 32768": "batch_size = 300", "input_shape = (32768,)": "input_shape = (777,)"},
    "level1/95_CrossEntropyLoss": {"batch_size = 32768": "batch_size = 40", "num_classes = 4096": "num_classes = 600"},
    "level1/96_HuberLoss": {"batch_size = 32768": "batch_size = 300", "input_shape = (32768,)": "input_shape = (777,)"},
    "level1/97_ScaledDotProductAttention": {
        "batch_size = 32": "batch_size = 1",
        "num_heads = 32": "num_heads = 2",
        "sequence_length = 512": "sequence_length = 33",
        "embedding_dimension = 1024": "embedding_dimension = 40",
    },
    "level1/98_KLDivLoss": {
        "batch_size = 8192 * 2": "batch_size = 96",
        "input_shape = (8192 * 2,)": "input_shape = (1000,)",
    },
    "level1/99_TripletMarginLoss": {
        "batch_size = 32768": "batch_size = 40",
        "input_shape = (8192,)": "input_shape = (600,)",
    },
    "level1/100_HingeLoss": {
        "batch_size = 32768": "batch_size = 100",
        "input_shape = (32768,)": "input_shape = (100,)",
    },
}


@pytest.mark.parametrize("name", CALIBRATION_PROBLEMS.ids())
def test_the_honest_kernel_of_each_output_easy_to_get_wrong_passes(evaluator, name):
    candidate = (CALIBRATION_KERNELS / f"{name}.py").read_text()
    result = evaluator.evaluate(CALIBRATION_PROBLEMS.load(name), candidate, CPU).result
    assert result.verdict is Verdict.PASSED, result.feedback
    if name == "inplace_axpy":  # its inputs are compared with the reference's, changed alike
        checks = [c for c in result.checks if c.name == "inputs_unchanged"]
        assert checks and all(c.passed and "in-place reference" in c.detail for c in checks)


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="KernelBench's problems are not fetched into .kb/KernelBench")
@pytest.mark.parametrize("problem_id", sorted(REDUCED_SIZES))
def test_the_honest_kernel_of_kernelbench_level1_94_to_100_passes_at_a_reduced_size(evaluator, problem_id):
    source = reduced(ProblemSet(KERNELBENCH).load(problem_id).source, REDUCED_SIZES[problem_id])
    candidate = (KERNELBENCH_KERNELS / f"{problem_id}.py").read_text()
    result = evaluator.evaluate(Problem(f"{problem_id}_reduced", source), candidate, CPU).result
    assert result.verdict is Verdict.PASSED, result.feedback
