"""ReLU of a mostly negative fp32 matrix (randn - 2.5): about 99.4% of the output is exactly zero.

An output of nearly all exact zeros matches a zero-filled buffer almost everywhere: checks that look at whether
an output depends on the kernels, or compare it with a poisoned or reused buffer, must still tell an honest kernel
from none (issue 35). An honest kernel must get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


rows = 128
cols = 96


def get_inputs():
    return [torch.randn(rows, cols) - 2.5]


def get_init_inputs():
    return []
