"""B3: the kernel writes the ReLU and then zeroes the input it read, so a reference run later on it sees zeros.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: inputs_unchanged
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_and_wipe(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)
    tl.store(x_ptr + offs, tl.zeros_like(x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _relu_and_wipe[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
        return out
