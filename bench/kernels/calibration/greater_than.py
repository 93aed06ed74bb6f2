"""Honest Triton elementwise `x > y` for bench/problems/calibration/greater_than, stored straight into a torch.bool
output. It must get `passed` on every evaluation (issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _greater(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x > y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty(x.shape, dtype=torch.bool, device=x.device)
        n = x.numel()
        _greater[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
