"""Honest control: fused linear + bias + ReLU into a flat `torch.empty` buffer, one launch, then a reshape.

problem: level2/1_Linear_Bias_ReLU
expect: passed
devices: cpu, cuda
catches: none

The legitimate pattern the B1/B8 defences must not flag: an uninitialised output, exactly one Triton launch that
writes all of it, and a view of that buffer (not a copy) returned.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_bias_relu(
    x_ptr,
    w_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(
            x_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0
        )
        # W is (N, K) row-major: the (K, N) tile of W^T is at w_ptr + n * K + k.
        wt = tl.load(
            w_ptr + offs_n[None, :] * K + ks[:, None], mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0
        )
        acc += tl.dot(x, wt, input_precision="ieee")
    acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    acc = tl.where(acc < 0.0, 0.0, acc)
    # The output is a flat buffer of M * N elements, indexed by hand.
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight.contiguous()
        b = self.linear.bias.contiguous()
        K = x.shape[-1]
        N = w.shape[0]
        x2 = x.reshape(-1, K).contiguous()
        M = x2.shape[0]
        flat = torch.empty(M * N, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        _linear_bias_relu[grid](x2, w, b, flat, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return flat.reshape(*x.shape[:-1], N)
