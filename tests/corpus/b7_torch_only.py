"""B7: no Triton at all: forward returns `torch.relu(x)`.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: static_no_triton_kernel, custom_kernel_launched
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
