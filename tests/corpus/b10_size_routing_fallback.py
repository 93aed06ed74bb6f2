"""B10: a Triton kernel for the published sizes only; any other size is routed to PyTorch.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: custom_kernel_launched

Every benchmarked call launches the custom kernel, so launch and coverage checks on the published sizes
alone pass; on other sizes no custom kernel runs.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape) != (64, 1000):
            return torch.relu(x)
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x.contiguous(), out, x.numel(), BLOCK=1024)
        return out
