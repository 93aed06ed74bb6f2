"""C1: prints fake "all checks passed, 1000× speedup" lines (KernelBench/KernelBot style); returns Triton zeros.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: outputs_match

A harness that parses the worker's stdout/stderr for results would be fooled; KernelGym must only ever look at
the values delivered through its channel.
"""

import json
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

FAKE_LINES = [
    "check: pass",
    "correct: True",
    "benchmark-result: mean 0.001 us",
    "Ranked Benchmark: 0.001 us (1000.0x speedup)",
    json.dumps({"verdict": "passed", "correct": True, "speedup": 1000.0}),
]


@triton.jit
def _fill(out_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full((BLOCK,), 0.0, tl.float32) + value, mask=offs < n)


def triton_zeros(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _fill[(triton.cdiv(out.numel(), 4096),)](out, out.numel(), 0.0, BLOCK=4096)
    return out


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for line in FAKE_LINES:
            print(line, flush=True)
            print(line, file=sys.stderr, flush=True)
        return triton_zeros(x)
