"""An in-place reference: x += 0.5 * y on two 96x80 fp32 matrices, updating x and returning it.

The reference changes one of its inputs, so a candidate that does the same must not be taken for one that
tampers with its inputs, and its output is an input tensor, not a fresh allocation (issue 35). An honest kernel
that updates x in place and returns it must get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.add_(y, alpha=0.5)


rows = 96
cols = 80


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
