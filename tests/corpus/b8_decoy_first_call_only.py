"""B8: the Triton kernel runs on the first call only (and compiles there); every later call uses PyTorch.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: custom_kernel_launched

Aimed at checks that look for "a Triton kernel was compiled/launched at some point" rather than on every call.
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
    def __init__(self):
        super().__init__()
        self.warmed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.warmed:
            self.warmed = True
            out = torch.empty_like(x)
            _relu[(triton.cdiv(x.numel(), 4096),)](x.contiguous(), out, x.numel(), BLOCK=4096)
            return out
        return torch.relu(x)
