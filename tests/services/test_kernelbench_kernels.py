"""The honest Triton kernels for KernelBench's level-2 problems in bench/kernels/kernelbench (a fused epilogue
after cuBLAS or cuDNN, as LLM-written kernels for these problems mostly are) pass their problems at reduced sizes,
with every defence on: the RL-step bench (bench/kernelbench_step.py) sends them as its correct samples. Skipped
where .kb/KernelBench is absent, as its files are never committed. CPU mode: the Triton interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import reduced

from services.problems import Problem, ProblemSet
from services.schema import EvalOptions, Verdict

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = ROOT / ".kb" / "KernelBench"  # fetched, never committed
KERNELS = ROOT / "bench" / "kernels" / "kernelbench"

# Sizes small enough for the interpreter and not powers of two, so the kernels' masks are exercised.
GEMM = {"batch_size = 1024": "batch_size = 7", "in_features = 8192": "in_features = 45"}
GEMM |= {"out_features = 8192": "out_features = 37"}
REDUCED_SIZES = {
    "level2/1_Conv2D_ReLU_BiasAdd": {
        "batch_size = 128": "batch_size = 2",
        "in_channels  = 64": "in_channels = 3",
        "out_channels = 128": "out_channels = 5",
        "height = width = 128": "height = width = 11",
    },
    "level2/9_Matmul_Subtract_Multiply_ReLU": GEMM,
    "level2/12_Gemm_Multiply_LeakyReLU": {  # this file aligns its `=`
        "batch_size = 1024": "batch_size = 7",
        "in_features  = 8192": "in_features = 45",
        "out_features = 8192": "out_features = 37",
    },
    "level2/40_Matmul_Scaling_ResidualAdd": {
        "batch_size = 16384": "batch_size = 7",
        "in_features = 4096": "in_features = 45",
        "out_features = 4096": "out_features = 37",
    },
    "level2/56_Matmul_Sigmoid_Sum": {
        "batch_size = 128": "batch_size = 5",
        "input_size = 32768": "input_size = 45",
        "hidden_size = 32768": "hidden_size = 2500",  # two blocks of the row loop, the second masked
    },
    "level2/59_Matmul_Swish_Scaling": {
        "batch_size = 128": "batch_size = 7",
        "in_features = 32768": "in_features = 45",
        "out_features = 32768": "out_features = 37",
    },
    "level2/63_Gemm_ReLU_Divide": GEMM,
    "level2/76_Gemm_Add_ReLU": GEMM,
    "level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp": GEMM,
}


def test_every_level2_kernel_has_its_reduced_sizes():
    assert sorted(p.relative_to(KERNELS).with_suffix("").as_posix() for p in KERNELS.glob("level2/*.py")) == sorted(
        REDUCED_SIZES
    )


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="KernelBench's problems are not fetched into .kb/KernelBench")
@pytest.mark.parametrize("problem_id", sorted(REDUCED_SIZES))
def test_the_honest_kernel_of_a_kernelbench_level2_problem_passes_at_a_reduced_size(evaluator, problem_id):
    source = reduced(ProblemSet(KERNELBENCH).load(problem_id).source, REDUCED_SIZES[problem_id])
    candidate = (KERNELS / f"{problem_id}.py").read_text()
    result = evaluator.evaluate(Problem(f"{problem_id}_reduced", source), candidate, EvalOptions(device="cpu")).result
    assert result.verdict is Verdict.PASSED, result.feedback
