"""The `kernelgym` command line, run as a real subprocess (real child processes, Triton interpreter on CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "services" / "bundled" / "problems"
RELU_PROBLEM = PROBLEMS / "level1" / "1_ReLU.py"
RELU_KERNEL = ROOT / "services" / "bundled" / "kernels" / "level1" / "1_ReLU.py"
TIMEOUT_S = 180

RAISING_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("kernel exploded on purpose")
"""


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


FAST = ("--device", "cpu", "--trials", "1", "--no-timing")


def test_missing_candidate_file_is_a_usage_error(tmp_path):
    missing = tmp_path / "nope.py"
    proc = _cli("eval", "--reference", RELU_PROBLEM, "--candidate", missing, *FAST)
    assert proc.returncode == 2
    assert f"no such candidate file: {missing}" in proc.stderr
    assert proc.stdout == ""


def test_missing_reference_file_is_a_usage_error(tmp_path):
    missing = tmp_path / "ref.py"
    proc = _cli("eval", "--reference", missing, "--candidate", RELU_KERNEL, *FAST)
    assert proc.returncode == 2
    assert f"no such reference file: {missing}" in proc.stderr


def test_neither_reference_nor_problems_is_a_usage_error():
    proc = _cli("eval", "--candidate", RELU_KERNEL, *FAST)
    assert proc.returncode == 2
    assert "give --reference FILE, or --problems DIR with --problem ID" in proc.stderr


def test_both_reference_and_problems_is_a_usage_error():
    proc = _cli(
        "eval", "--reference", RELU_PROBLEM, "--problems", PROBLEMS, "--problem", "level1/1_ReLU",
        "--candidate", RELU_KERNEL, *FAST,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "give --reference FILE" in proc.stderr


def test_problems_without_problem_id_is_a_usage_error():
    proc = _cli("eval", "--problems", PROBLEMS, "--candidate", RELU_KERNEL, *FAST)
    assert proc.returncode == 2
    assert "give --reference FILE" in proc.stderr


def test_unknown_problem_id_is_a_usage_error():
    proc = _cli("eval", "--problems", PROBLEMS, "--problem", "level1/404_Missing", "--candidate", RELU_KERNEL, *FAST)
    assert proc.returncode == 2
    assert "unknown problem id 'level1/404_Missing'" in proc.stderr


def test_missing_candidate_argument_is_an_argparse_error():
    proc = _cli("eval", "--reference", RELU_PROBLEM)
    assert proc.returncode == 2
    assert "--candidate" in proc.stderr


def test_bundled_kernel_passes_with_json_output():
    proc = _cli("eval", "--reference", RELU_PROBLEM, "--candidate", RELU_KERNEL, *FAST, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "passed"
    assert result["problem"] == "1_ReLU"
    assert result["compiled"] is True
    assert result["correct"] is True
    assert result["timing_meaningful"] is False
    assert result["speedup"] is None
    assert result["candidate_runtime"] is None  # --no-timing
    assert result["correctness"]["trials_run"] == 1
    assert result["correctness"]["trials_passed"] == 1
    assert result["correctness"]["total_elements"] == 64 * 1000
    assert result["environment"]["device"] == "cpu"


def test_candidate_that_raises_is_a_runtime_error_verdict(tmp_path):
    candidate = tmp_path / "raises.py"
    candidate.write_text(RAISING_CANDIDATE)
    proc = _cli("eval", "--reference", RELU_PROBLEM, "--candidate", candidate, *FAST, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "runtime_error"
    assert result["correct"] is False
    assert "kernel exploded on purpose" in result["feedback"]


def test_problem_set_and_id_with_human_summary():
    proc = _cli("eval", "--problems", PROBLEMS, "--problem", "level1/1_ReLU", "--candidate", RELU_KERNEL, *FAST)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first == "level1/1_ReLU: PASSED"
    assert "PASSED" in proc.stdout
    assert "phases: " in proc.stdout
    assert not proc.stdout.lstrip().startswith("{")
