"""Honest Triton softmax row sums for bench/problems/calibration/softmax_row_sums: one program per row computes
the softmax (max, exp, normalise) and sums the normalised row, so its output is 1 up to rounding as the
reference's is. It must get `passed` on every evaluation (issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_row_sum(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row, tl.sum(e / tl.sum(e, axis=0), axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, dtype=x.dtype, device=x.device)
        _softmax_row_sum[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
        return out
