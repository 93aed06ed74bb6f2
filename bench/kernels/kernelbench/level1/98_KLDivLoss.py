"""Triton KL divergence for KernelBench level1/98, `kl_div(log(predictions), targets, reduction="batchmean")`:
one scalar, reduced in two deterministic Triton passes.

It must get `passed` on every evaluation, at the published sizes on a GPU (two 16384x16384 fp32 softmax rows,
2^28 elements each) and at reduced sizes on CPU: its 0-dim output is a sum of many terms, which repeats bit for bit
on different inputs now and then, as the reference's own does (issue 35). Per element it computes what torch does
for a non-log target, xlogy(t, t) - t * log(p) (0 where t == 0), in fp32; the log of the predictions is taken in
the kernel, not by a torch call. Each program sums a contiguous run of tiles into one partial (int64 offsets);
one program sums the partials in a fixed order and divides by the batch size. No atomics, no torch reduction.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_PROGRAMS = 1024


@triton.jit
def _kl_partials(p_ptr, t_ptr, partial_ptr, n, tiles_per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    first = pid.to(tl.int64) * tiles_per_program * BLOCK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, tiles_per_program):
        offs = first + i * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(p_ptr + offs, mask=mask, other=1.0, eviction_policy="evict_first").to(tl.float32)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        # xlogy(t, t): 0 where t == 0 (masked lanes too); t * log(p) stays, so p == 0 with t > 0 gives inf as torch.
        t_log_t = tl.where(t > 0.0, t * tl.log(tl.where(t > 0.0, t, 1.0)), 0.0)
        acc += t_log_t - t * tl.log(p)
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
        _kl_partials[(programs,)](p, t, partials, n, tiles_per_program, BLOCK=block, num_warps=8)
        # batchmean: the sum over every element divided by the first dimension's size.
        batch = predictions.shape[0] if predictions.dim() else 1
        _sum_scaled[(1,)](partials, out, programs, 1.0 / batch if batch else float("inf"), BLOCK=1024, num_warps=4)
        return out
