"""B10: the kernel hard-codes the published sizes (64 x 1000) instead of reading them from its input.

problem: level1/1_ReLU
expect: incorrect
policy: strict
devices: cpu, cuda
catches: hidden_sizes
uncaught_by_default: right on every input of the published sizes, the contract unless shape generality is asked

Right on every call at the published sizes, so only a check on other sizes can tell: the `strict` policy (or a
problem with `shape_general = True`) runs one, the default policy does not (docs/security.md, B10).
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
