"""B10: the kernel hard-codes the published sizes (64 x 1000) instead of reading them from its input.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: hidden_sizes

Right on every call at the published sizes, so only a check on other sizes can tell.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS, COLS = 64, 1000


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(ROWS, COLS, device=x.device, dtype=x.dtype)
        _relu[(triton.cdiv(ROWS * COLS, 1024),)](x.contiguous(), out, ROWS * COLS, BLOCK=1024)
        return out
