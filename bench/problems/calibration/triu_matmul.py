"""Upper-triangular part of a product of two upper-triangular fp32 matrices (64x64): about half the output is
exactly zero, and the reference's own matmul result, freed by `triu`, holds the exact answer.

KernelBench's triangular matmuls (level1/14 and 15) had the reference itself rejected by the output-dependence
check: a fresh allocation got back the block that held an earlier call's output (issue 35). An honest kernel must
get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.triu(torch.matmul(a, b))


n = 64


def get_inputs():
    return [torch.triu(torch.randn(n, n)), torch.triu(torch.randn(n, n))]


def get_init_inputs():
    return []
