"""Honest control: ReLU with a fixed number of persistent programs walking the input in a grid-stride loop.

problem: level1/1_ReLU
expect: passed
devices: cpu, cuda
catches: none

One launch per call, the output allocated with `torch.empty_like`, every element written exactly once.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_grid_stride(x_ptr, out_ptr, n, NUM_PROGRAMS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for start in range(pid * BLOCK, n, NUM_PROGRAMS * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    NUM_PROGRAMS = 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        if n:
            _relu_grid_stride[(self.NUM_PROGRAMS,)](x, out, n, NUM_PROGRAMS=self.NUM_PROGRAMS, BLOCK=4096)
        return out
