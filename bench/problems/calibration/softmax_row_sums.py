"""Row sums of a row softmax (16x100 fp32): 16 values that are 1 up to a few fp32 steps, whatever the inputs.

The output barely depends on the inputs and repeats bit for bit from call to call, the reference's as much as an
honest kernel's: checks of repeated outputs and of output dependence must allow for it (issue 35). An honest
kernel must get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1).sum(dim=1)


rows = 16
cols = 100


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
