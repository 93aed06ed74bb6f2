"""RMS norm over the last dim with a learnable per-feature weight: x / sqrt(mean(x^2) + eps) * w."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean_sq = torch.mean(x * x, dim=-1, keepdim=True)
        return x * torch.rsqrt(mean_sq + self.eps) * self.weight


rows = 96
hidden = 640
eps = 1e-6


def get_inputs():
    return [torch.randn(rows, hidden)]


def get_init_inputs():
    return [hidden, eps]
