"""Honest control: row softmax that walks blocks of rows in column tiles with an online max and sum.

problem: level1/4_Softmax_rows
expect: passed
devices: cpu, cuda
catches: none

Two passes per row block (online max/normaliser, then write), no PyTorch math on the result.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_online(x_ptr, out_ptr, M, N, stride_x, stride_o, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    x_rows = x_ptr + rows.to(tl.int64)[:, None] * stride_x
    o_rows = out_ptr + rows.to(tl.int64)[:, None] * stride_o
    m = tl.full((BLOCK_M,), -1e30, tl.float32)
    s = tl.zeros((BLOCK_M,), tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_ok[:, None] & (cols[None, :] < N)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=-1e30).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        e = tl.where(mask, tl.exp(x - m_new[:, None]), 0.0)
        s = s * tl.exp(m - m_new) + tl.sum(e, axis=1)
        m = m_new
    s = tl.where(row_ok, s, 1.0)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_ok[:, None] & (cols[None, :] < N)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=-1e30).to(tl.float32)
        y = tl.exp(x - m[:, None]) / s[:, None]
        tl.store(o_rows + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.contiguous().view(-1, shape[-1])
        out = torch.empty_like(x2)
        M, N = x2.shape
        if out.numel():
            grid = (triton.cdiv(M, 8),)
            _softmax_online[grid](x2, out, M, N, x2.stride(0), out.stride(0), BLOCK_M=8, BLOCK_N=256)
        return out.view(shape)
