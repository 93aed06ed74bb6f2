"""Elementwise comparison of two fp32 matrices: a boolean output, about half True.

A bool output is compared exactly, has one bit of information per element and may be stored by a kernel as bytes;
checks that digest or perturb outputs must treat it as the reference's own bool tensor (issue 35). An honest
kernel must get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x > y


rows = 64
cols = 50


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
