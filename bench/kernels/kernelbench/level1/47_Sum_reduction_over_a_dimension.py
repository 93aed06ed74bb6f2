"""Triton sum over one dimension (keepdim=True) for KernelBench level1/47, deterministic, no atomics."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_mid_kernel(
    x_ptr, out_ptr, R, N, n_col_blocks,
    BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # x viewed as (O, R, N) contiguous, N > 1: reduce over R. Each program owns BLOCK_N contiguous
    # inner columns of one outer slice and streams down R in BLOCK_R-row tiles (coalesced rows).
    pid = tl.program_id(0)
    pid_n = pid % n_col_blocks
    o = (pid // n_col_blocks).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    base = x_ptr + o * R * N  # int64, since o is int64
    acc = tl.zeros((BLOCK_R, BLOCK_N), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & col_mask[None, :]
        ptrs = base + rows[:, None].to(tl.int64) * N + cols[None, :]
        acc += tl.load(ptrs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + o * N + cols, total.to(out_ptr.dtype.element_ty), mask=col_mask)


@triton.jit
def _sum_last_kernel(x_ptr, out_ptr, O, R, BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr):
    # x viewed as (O, R) contiguous: reduce each row (the reduced dim is innermost).
    rows = tl.program_id(0) * BLOCK_O + tl.arange(0, BLOCK_O)
    row_mask = rows < O
    row_base = rows.to(tl.int64) * R
    acc = tl.zeros((BLOCK_O, BLOCK_R), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        cols = r0 + tl.arange(0, BLOCK_R)
        mask = row_mask[:, None] & (cols[None, :] < R)
        acc += tl.load(x_ptr + row_base[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, total.to(out_ptr.dtype.element_ty), mask=row_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(x.shape)
        d = self.dim % x.dim()
        O = math.prod(shape[:d])
        R = shape[d]
        N = math.prod(shape[d + 1:])
        out_shape = shape[:d] + (1,) + shape[d + 1:]
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        if out.numel() == 0:
            return out
        if R == 0:
            return out.zero_()
        xc = x.contiguous()
        if N > 1:
            block_n = max(16, min(128, triton.next_power_of_2(N)))
            block_r = max(1, min(64, triton.next_power_of_2(R), 8192 // block_n))
            n_col_blocks = triton.cdiv(N, block_n)
            grid = (n_col_blocks * O,)
            _sum_mid_kernel[grid](xc, out, R, N, n_col_blocks, BLOCK_R=block_r, BLOCK_N=block_n, num_warps=8)
        else:
            block_r = max(16, min(1024, triton.next_power_of_2(R)))
            block_o = max(1, min(64, 4096 // block_r, triton.next_power_of_2(O)))
            grid = (triton.cdiv(O, block_o),)
            _sum_last_kernel[grid](xc, out, O, R, BLOCK_O=block_o, BLOCK_R=block_r, num_warps=8)
        return out
