"""Honest Triton in-place x += 0.5 * y for bench/problems/calibration/inplace_axpy: the kernel writes the result
into x and forward returns x, as the reference does. It must get `passed` on every evaluation (issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _axpy_(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + alpha * y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        assert x.is_contiguous() and y.is_contiguous(), "updates x in place through its flat storage"
        n = x.numel()
        _axpy_[(triton.cdiv(n, 1024),)](x, y, n, 0.5, BLOCK=1024)
        return x
