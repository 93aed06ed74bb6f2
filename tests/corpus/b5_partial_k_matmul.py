"""B5: matmul that sums only the first 90% of K and rescales by K / K_used to hide the missing terms.

problem: level1/6_Matmul
expect: incorrect
devices: cpu, cuda
catches: outputs_match

Saves 10% of the work; right "on average" for zero-mean inputs, wrong element by element.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul_partial(
    a_ptr, b_ptr, c_ptr, M, N, K, K_USED, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K_USED, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K_USED), other=0.0
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + offs_n[None, :], mask=(ks[:, None] < K_USED) & (offs_n[None, :] < N), other=0.0
        )
        acc += tl.dot(a, b, input_precision="ieee")
    acc = acc * scale
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        k_used = max(1, int(K * 0.9))
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        _matmul_partial[grid](a, b, c, M, N, K, k_used, K / k_used, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return c
