"""Output dependence: a candidate whose own kernels can be removed without changing its output is rejected, and
the legitimate ways of using kernels pass (cached buffers, in-place kernels, in-place references, autotune,
kernels that run on some calls only). CPU mode: real kernels through the Triton interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import IN_PLACE_BODY, IN_PLACE_KERNEL, IN_PLACE_REFERENCE, bundled_source, relu_candidate

from services.problems import Problem
from services.schema import Check, EvalOptions, EvalResult, Verdict

NO_TIMING = EvalOptions(device="cpu", timing=False)
CHECK = "output_depends_on_kernels"


def dependence(result: EvalResult) -> Check:
    [check] = [c for c in result.checks if c.name == CHECK]
    return check


@pytest.mark.parametrize(
    "launch",
    ["_relu[(1,)](self.scratch, self.scratch, 16, BLOCK=16)", "_relu[(1,)](x, self.scratch, 16, BLOCK=16)"],
    ids=["scratch_only", "reads_the_input"],
)
def test_decoy_kernel_while_pytorch_computes_is_rejected(evaluator, relu, launch):
    body = f"""
    if getattr(self, "scratch", None) is None:
        self.scratch = torch.zeros(16, device=x.device)
    {launch}
    return torch.relu(x)
    """
    result = evaluator.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict is Verdict.REJECTED, result.feedback
    check = dependence(result)
    assert not check.passed
    assert check.measured["launches_neutralised"] >= 1 and check.measured["mismatched_elements"] == 0
    assert check.thresholds["mismatched_elements"] == 0 and check.thresholds["atol"] > 0
    assert "contribute nothing" in result.feedback and "_relu" in result.feedback


CACHED_BUFFER = """
if getattr(self, "out", None) is None or self.out.shape != x.shape:
    self.out = torch.empty_like(x)
_relu[(triton.cdiv(x.numel(), 4096),)](x, self.out, x.numel(), BLOCK=4096)
return self.out.clone()
"""
IN_PLACE_ON_A_COPY = """
y = x.clone()
_relu[(triton.cdiv(y.numel(), 4096),)](y, y, y.numel(), BLOCK=4096)
return y
"""
FIRST_CALL_TABLE = """
if getattr(self, "floor", None) is None:
    self.floor = torch.empty(1, device=x.device)
    _fill[(1,)](self.floor, 0.0, 1, BLOCK=16)
out = torch.empty_like(x)
_relu_floor[(triton.cdiv(x.numel(), 4096),)](x, self.floor, out, x.numel(), BLOCK=4096)
return out
"""
FIRST_CALL_KERNELS = """
@triton.jit
def _fill(ptr, value, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], tl.float32) + value, mask=offs < n)


@triton.jit
def _relu_floor(x_ptr, floor_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    floor = tl.load(floor_ptr)
    tl.store(out_ptr + offs, tl.where(x < floor, floor, x), mask=mask)
"""
AUTOTUNED = """
out = torch.empty_like(x)
_relu_tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
return out
"""
AUTOTUNED_KERNEL = """
_relu_tuned = triton.autotune(configs=[triton.Config({"BLOCK": 1024}), triton.Config({"BLOCK": 4096})], key=["n"])(
    _relu
)
"""
ROWS_BY_INDEX = """
idx = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
_iota[(1,)](idx, x.shape[0], BLOCK=128)
return torch.relu(x).index_select(0, idx)
"""
IOTA_KERNEL = """
@triton.jit
def _iota(ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(ptr + offs, offs.to(tl.int64), mask=offs < n)
"""


@pytest.mark.parametrize(
    ("body", "extra"),
    [
        (CACHED_BUFFER, ""),
        (IN_PLACE_ON_A_COPY, ""),
        (FIRST_CALL_TABLE, FIRST_CALL_KERNELS),
        (AUTOTUNED, AUTOTUNED_KERNEL),
        (ROWS_BY_INDEX, IOTA_KERNEL),
    ],
    ids=["cached_output_buffer", "in_place_on_a_copy", "table_from_a_first_call_kernel", "autotune", "index_kernel"],
)
def test_kernels_the_output_depends_on_pass(evaluator, relu, body, extra):
    result = evaluator.evaluate(relu, relu_candidate(body, extra), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback
    check = dependence(result)
    # Without its index kernel, index_select fails on garbage indices: the neutralised call ends in an error.
    assert check.passed and (check.measured.get("launches_neutralised", 0) >= 1 or "neutralised_call" in check.measured)


def test_bundled_kernel_passes_with_the_check_recorded(evaluator, relu):
    result = evaluator.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).result
    assert result.verdict is Verdict.PASSED
    check = dependence(result)
    assert check.passed and "_relu_kernel" in check.detail


def test_in_place_kernel_of_an_in_place_reference_passes(evaluator):
    problem = Problem(id="inplace", source=IN_PLACE_REFERENCE.format(op="x.add_(1.0)"))
    result = evaluator.evaluate(
        problem, relu_candidate(IN_PLACE_BODY, IN_PLACE_KERNEL.format(expr="x + 1.0")), NO_TIMING
    ).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert dependence(result).passed


def test_the_check_is_off_with_the_defences(undefended, relu):
    result = undefended.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).result
    assert result.verdict is Verdict.PASSED
    assert not [c for c in result.checks if c.name == CHECK]


def test_neutralised_launches_compile_and_are_counted_but_never_run(tmp_path):
    """The recorder on its own, in a fresh interpreter-mode process (it patches Triton's classes)."""
    script = textwrap.dedent(
        """
        import importlib.util, sys, torch, triton
        from services.child.guards import CANDIDATE_MODULE, LaunchRecorder

        recorder = LaunchRecorder()
        recorder.install()
        spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, sys.argv[1])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        x, out = torch.ones(8), torch.zeros(8)
        recorder.neutralised = True
        module.fill[(1,)](x, out, 8, BLOCK=8)
        print(recorder.take(), out.sum().item())
        recorder.neutralised = False
        module.fill[(1,)](x, out, 8, BLOCK=8)
        print(recorder.take(), out.sum().item())
        """
    )
    kernel = tmp_path / "kernel.py"
    kernel.write_text(
        textwrap.dedent(
            """
            import triton
            import triton.language as tl


            @triton.jit
            def fill(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0, mask=offs < n)
            """
        )
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run(
        [sys.executable, "-c", script, str(kernel)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=True,
    )
    assert run.stdout.split("\n")[:2] == ["{'fill': 1} 0.0", "{'fill': 1} 16.0"]
