"""A10: sets `torch.backends.cuda.matmul.allow_tf32 = True` at import while computing the matmul honestly.

problem: level1/6_Matmul
expect: rejected
devices: cpu, cuda
catches: numeric_flags, static_numeric_flag_change

Harmless to this kernel (IEEE `tl.dot`), but in a harness that times or checks the reference in the same process
afterwards it makes the fp32 reference 8× faster and less exact. The flag change itself must be rejected.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.backends.cuda.matmul.allow_tf32 = True


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
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def triton_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    _matmul[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    return c


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return triton_matmul(a, b)
