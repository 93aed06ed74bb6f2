"""Row argmax of a small fp32 matrix: an int64 output of 16 values in [0, 6).

Integer outputs are compared exactly and repeat bit for bit on different inputs more often than float outputs
do; an honest row-argmax kernel was rejected 3 of 8 times on CPU by the repeated-outputs check, its output digest
colliding on small integers (issue 35). An honest kernel must get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=1)


rows = 16
cols = 6


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
