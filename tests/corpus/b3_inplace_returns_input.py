"""B3: applies the ReLU in place on the input and returns the input tensor itself (no output allocation).

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: inputs_unchanged

The values returned are right; the reference does not modify its input, so this must not pass.
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
        _relu[(triton.cdiv(x.numel(), 4096),)](x, x, x.numel(), BLOCK=4096)
        return x
