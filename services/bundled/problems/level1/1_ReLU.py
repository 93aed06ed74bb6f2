"""Elementwise ReLU: y = max(x, 0). The input is requested on device="cuda" on purpose."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


rows = 64
cols = 1000


def get_inputs():
    return [torch.randn(rows, cols, device="cuda")]


def get_init_inputs():
    return []
