"""Triton scaled dot-product attention for KernelBench level1/97 (no mask, no dropout, scale 1/sqrt(D)), in fp32.

In issue 35's range 94-100, though not a loss: its output is a full (B, H, L, D) tensor, not a scalar. It must get
`passed` on every evaluation, at the published sizes on a GPU (Q, K, V of 32x32x512x1024 fp32, 2 GiB each) and at
reduced sizes on CPU, within the fp32 tolerance: every `tl.dot` asks for IEEE fp32 (`input_precision="ieee"`),
since Triton's default TF32 misses a 1e-4 tolerance. A head dimension of 1024 is too wide to keep a row block's
output in registers as a fused flash kernel would, so it runs three Triton kernels: S = Q K^T * scale per head
(fp32 scratch of B*H*L*L), a row softmax of S in place, and O = S V. Deterministic: no atomics, no split-K.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scores(q_ptr, k_ptr, s_ptr, L, S, D, scale, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # One (BM, BN) tile of Q[h] @ K[h]^T for head h = program_id(2).
    h = tl.program_id(2).to(tl.int64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    q_base = q_ptr + h * L * D
    k_base = k_ptr + h * S * D
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, D, BK):
        rk = k0 + tl.arange(0, BK)
        q = tl.load(q_base + rm[:, None] * D + rk[None, :], mask=(rm[:, None] < L) & (rk[None, :] < D), other=0.0)
        kt = tl.load(k_base + rn[None, :] * D + rk[:, None], mask=(rn[None, :] < S) & (rk[:, None] < D), other=0.0)
        acc = tl.dot(q, kt, acc, input_precision="ieee")
    s_base = s_ptr + h * L * S
    tl.store(s_base + rm[:, None] * S + rn[None, :], acc * scale, mask=(rm[:, None] < L) & (rn[None, :] < S))


@triton.jit
def _softmax_rows(s_ptr, S, BLOCK: tl.constexpr):
    # One row of the scores, in place.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ptrs = s_ptr + row * S + cols
    x = tl.load(ptrs, mask=cols < S, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(ptrs, e / tl.sum(e, axis=0), mask=cols < S)


@triton.jit
def _weighted_values(p_ptr, v_ptr, o_ptr, L, S, D, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # One (BM, BN) tile of P[h] @ V[h]: rows of the queries, columns of the head dimension.
    h = tl.program_id(2).to(tl.int64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    p_base = p_ptr + h * L * S
    v_base = v_ptr + h * S * D
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, S, BK):
        rk = k0 + tl.arange(0, BK)
        p = tl.load(p_base + rm[:, None] * S + rk[None, :], mask=(rm[:, None] < L) & (rk[None, :] < S), other=0.0)
        v = tl.load(v_base + rk[:, None] * D + rn[None, :], mask=(rk[:, None] < S) & (rn[None, :] < D), other=0.0)
        acc = tl.dot(p, v, acc, input_precision="ieee")
    o_base = o_ptr + h * L * D
    tl.store(o_base + rm[:, None] * D + rn[None, :], acc, mask=(rm[:, None] < L) & (rn[None, :] < D))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        *batch, L, D = Q.shape
        S, Dv = K.shape[-2], V.shape[-1]
        heads = math.prod(batch)
        q = Q.contiguous().float()
        k = K.contiguous().float()
        v = V.contiguous().float()
        out = torch.empty((*batch, L, Dv), device=Q.device, dtype=Q.dtype)
        if out.numel() == 0:
            return out
        scores = torch.empty((heads, L, S), device=Q.device, dtype=torch.float32)
        bm, bn, bk = 64, 64, 32
        grid = (triton.cdiv(L, bm), triton.cdiv(S, bn), heads)
        _scores[grid](q, k, scores, L, S, D, 1.0 / math.sqrt(D), BM=bm, BN=bn, BK=bk, num_warps=4, num_stages=3)
        _softmax_rows[(heads * L,)](scores, S, BLOCK=triton.next_power_of_2(S), num_warps=4)
        grid = (triton.cdiv(L, bm), triton.cdiv(Dv, bn), heads)
        _weighted_values[grid](scores, v, out, L, S, Dv, BM=bm, BN=bn, BK=bk, num_warps=4, num_stages=3)
        return out
