"""C1: prints fake "all checks passed, 1000× speedup" lines (KernelBench/KernelBot style) and returns zeros.

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

FAKE_LINES = [
    "check: pass",
    "correct: True",
    "benchmark-result: mean 0.001 us",
    "Ranked Benchmark: 0.001 us (1000.0x speedup)",
    json.dumps({"verdict": "passed", "correct": True, "speedup": 1000.0}),
]


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for line in FAKE_LINES:
            print(line, flush=True)
            print(line, file=sys.stderr, flush=True)
        return torch.zeros_like(x)
