"""B8: a Triton ReLU kernel is defined (so the source "has a kernel") but never launched; PyTorch computes.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: custom_kernel_launched
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
    # The "optimised" branch is for inputs the benchmark never sends.
    MIN_TRITON_ELEMENTS = 1 << 40

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() >= self.MIN_TRITON_ELEMENTS:
            out = torch.empty_like(x)
            _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
            return out
        return torch.clamp_min(x, 0.0)
