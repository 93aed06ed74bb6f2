"""Honest Triton row argmax for bench/problems/calibration/row_argmax: one program per row, int64 output; the
first index of the maximum on ties, as torch.argmax. It must get `passed` on every evaluation (issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_argmax(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=float("-inf"))
    best = tl.max(x, axis=0)
    first = tl.min(tl.where((x == best) & (offs < cols), offs, BLOCK), axis=0)
    tl.store(out_ptr + row, first.to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, dtype=torch.int64, device=x.device)
        _row_argmax[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
        return out
