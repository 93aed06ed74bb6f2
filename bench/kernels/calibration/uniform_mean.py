"""Honest Triton mean for bench/problems/calibration/uniform_mean: per-program partial sums of contiguous tiles,
then one program sums the partials in a fixed order and divides by n, into the 0-dim output. Deterministic, no
atomics. It must get `passed` on every evaluation, though its outputs repeat across calls as the reference's do
(issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _partial_sums(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(partial_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@triton.jit
def _mean_of(partial_ptr, out_ptr, parts, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, parts, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < parts, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        parts = triton.cdiv(n, 4096)
        partials = torch.empty(parts, dtype=torch.float32, device=x.device)
        out = torch.empty((), dtype=x.dtype, device=x.device)
        _partial_sums[(parts,)](x, partials, n, BLOCK=4096)
        _mean_of[(1,)](partials, out, parts, n, BLOCK=256)
        return out
