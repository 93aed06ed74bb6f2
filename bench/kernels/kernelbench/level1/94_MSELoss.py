"""Triton mean squared error for KernelBench level1/94: one scalar, reduced in two deterministic Triton passes.

It must get `passed` on every evaluation, at the published sizes on a GPU (two 32768x32768 fp32 inputs, 2^30
elements each) and at reduced sizes on CPU: its 0-dim output is the mean of many terms, which repeats bit for bit
on different inputs now and then, as the reference's own does (issue 35). Each program sums a contiguous run of
tiles into one partial (int64 offsets); one program then sums the partials in a fixed order and scales by 1/n, so
the result is the same on every call with the same inputs. No atomics, no torch reduction.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_PROGRAMS = 1024


@triton.jit
def _squared_error_partials(p_ptr, t_ptr, partial_ptr, n, tiles_per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    first = pid.to(tl.int64) * tiles_per_program * BLOCK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, tiles_per_program):
        offs = first + i * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(p_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        d = p - t
        acc += d * d
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _sum_scaled(partial_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, (tl.sum(acc, axis=0) * scale).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = torch.broadcast_tensors(predictions, targets)
        p, t = p.contiguous(), t.contiguous()
        out = torch.empty((), device=p.device, dtype=torch.result_type(predictions, targets))
        n = p.numel()
        block = min(4096, triton.next_power_of_2(max(n, 16)))
        tiles = max(triton.cdiv(n, block), 1)
        programs = min(tiles, MAX_PROGRAMS)
        tiles_per_program = triton.cdiv(tiles, programs)
        programs = triton.cdiv(tiles, tiles_per_program)
        partials = torch.empty(programs, device=p.device, dtype=torch.float32)
        _squared_error_partials[(programs,)](p, t, partials, n, tiles_per_program, BLOCK=block, num_warps=8)
        # n == 0 gives 0 * inf = nan, as torch.mean of an empty tensor does.
        scale = 1.0 / n if n else float("inf")
        _sum_scaled[(1,)](partials, out, programs, scale, BLOCK=1024, num_warps=4)
        return out
