"""Reduction: sum of a 3-D tensor over dim 1 (keepdim=False), (B, R, N) -> (B, N)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


batch = 16
reduce_len = 190
inner = 30


def get_inputs():
    return [torch.randn(batch, reduce_len, inner)]


def get_init_inputs():
    return []
