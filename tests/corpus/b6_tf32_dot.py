"""B6: fp32 matmul whose `tl.dot` runs in TF32 (`input_precision="tf32"`): 8× faster tensor-core math, ~1e-3 error.

problem: level1/6_Matmul
expect: incorrect
devices: cuda
catches: outputs_match

The Triton interpreter computes the dot exactly whatever the precision, so this downgrade exists only on CUDA.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + offs_n[None, :], mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0
        )
        acc += tl.dot(a, b, input_precision="tf32")
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        _matmul[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return c
