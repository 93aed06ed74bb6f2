"""Honest Triton triu(a @ b) for bench/problems/calibration/triu_matmul: one program per output tile computes
the product with IEEE fp32 dots (TF32 would miss the fp32 tolerance on a GPU) and writes zeros below the
diagonal itself, tiles wholly below it included, so every element of the fresh output is the kernel's. It must
get `passed` on every evaluation (issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _triu_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if tl.program_id(1) * BN + BN - 1 >= tl.program_id(0) * BM:  # the tile reaches the diagonal or above it
        for k0 in range(0, K, BK):
            rk = k0 + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
    acc = tl.where(rn[None, :] >= rm[:, None], acc, 0.0)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        (M, K), N = a.shape, b.shape[1]
        out = torch.empty((M, N), dtype=a.dtype, device=a.device)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        _triu_matmul[grid](a, b, out, M, N, K, BM=32, BN=32, BK=32)
        return out
