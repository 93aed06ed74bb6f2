"""Honest Triton column argmin for bench/problems/calibration/column_argmin: each program takes a block of
columns and walks down the rows (a strided reduction), keeping the first index of the minimum as torch.argmin.
It must get `passed` on every evaluation (issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _column_argmin(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < cols
    best = tl.load(x_ptr + offs, mask=mask, other=0.0)
    where = tl.zeros((BLOCK,), dtype=tl.int64)
    for r in range(1, rows):
        x = tl.load(x_ptr + r * cols + offs, mask=mask, other=0.0)
        smaller = x < best  # strictly: the first minimum wins a tie
        best = tl.where(smaller, x, best)
        where = tl.where(smaller, r, where)
    tl.store(out_ptr + offs, where, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(cols, dtype=torch.int64, device=x.device)
        block = min(1024, triton.next_power_of_2(cols))
        _column_argmin[(triton.cdiv(cols, block),)](x, out, rows, cols, BLOCK=block)
        return out
