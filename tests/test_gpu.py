"""The evaluation path on a real GPU: honest kernels pass with meaningful timing, crashes and the
timing attacks that only a GPU can express are caught. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from helpers import bundled_source, relu_candidate

from services.schema import EvalOptions, Verdict

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

CUDA = EvalOptions(device="cuda", timing_budget_s=2.0)
NO_TIMING = EvalOptions(device="cuda", timing=False)


@pytest.mark.parametrize(
    "problem_id", ["level1/1_ReLU", "level1/4_Softmax_rows", "level1/6_Matmul", "level2/1_Linear_Bias_ReLU"]
)
def test_honest_kernel_passes_with_timing(evaluator, problems, problem_id):
    result = evaluator.evaluate(problems.load(problem_id), bundled_source(problem_id), CUDA)
    assert result.verdict is Verdict.PASSED, [c for c in result.checks if not c.passed]
    assert result.timing_meaningful and result.speedup is not None and result.speedup > 0
    assert result.candidate_runtime.trials >= 20 and result.reference_runtime.trials >= 20
    assert result.environment.gpu_name
    assert all(c.passed for c in result.checks), result.checks


def test_illegal_memory_access_is_a_clear_verdict_and_next_evaluation_unaffected(evaluator, relu):
    extra = """
@triton.jit
def _wild(x_ptr, out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + far
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
"""
    body = "out = torch.empty_like(x)\n_wild[(1,)](x, out, 1 << 40, BLOCK=128)\ntorch.cuda.synchronize()\nreturn out"
    result = evaluator.evaluate(relu, relu_candidate(body, extra), NO_TIMING)
    assert result.verdict in (Verdict.RUNTIME_ERROR, Verdict.CRASHED)
    assert evaluator.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).verdict is Verdict.PASSED


def test_huge_gpu_allocation_is_runtime_error(evaluator, relu):
    body = "junk = torch.empty(1 << 50, dtype=torch.uint8, device=x.device)\nreturn triton_relu(x)"
    result = evaluator.evaluate(relu, relu_candidate(body), NO_TIMING)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "memory" in result.feedback.lower()


def test_side_stream_work_is_rejected(evaluator, problems):
    problem = problems.load("level1/6_Matmul")
    body = (
        bundled_source("level1/6_Matmul").replace("class ModelNew", "class _Honest")
        + """

class ModelNew(_Honest):
    def forward(self, A, B):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = super().forward(A, B)
            torch.cuda._sleep(2_000_000)  # about a millisecond of GPU time the caller's events never see
        return out
"""
    )
    result = evaluator.evaluate(problem, body, CUDA)
    assert result.verdict is Verdict.REJECTED, result.feedback


def test_background_thread_is_rejected(evaluator, relu):
    body = """
import threading
out = torch.empty_like(x)
def late():
    import time
    time.sleep(0.001)
    out.copy_(torch.relu(x))
threading.Thread(target=late).start()
return out
"""
    result = evaluator.evaluate(relu, relu_candidate(body), CUDA)
    assert result.verdict in (Verdict.REJECTED, Verdict.INCORRECT)
    assert not result.correct
