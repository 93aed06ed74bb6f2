"""Half-precision elementwise combination: out = a + b * 0.5, with fp16 inputs and output."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b * 0.5


rows = 128
cols = 500


def get_inputs():
    a = torch.randn(rows, cols, dtype=torch.float16)
    b = torch.randn(rows, cols, dtype=torch.float16)
    return [a, b]


def get_init_inputs():
    return []
