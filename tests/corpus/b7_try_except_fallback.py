"""B7: a Triton fused linear+ReLU that always fails to compile, wrapped in try/except that falls back to PyTorch.

problem: level2/1_Linear_Bias_ReLU
expect: rejected
devices: cpu, cuda
catches: custom_kernel_launched

BLOCK_K=24 is not a power of two, so `tl.arange` fails at compile time on every call; the except branch returns
`F.linear` + ReLU, which is correct. The source looks like a Triton submission with a defensive fallback.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _linear_bias_relu(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(
            x_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0
        )
        wt = tl.load(
            w_ptr + offs_n[None, :] * K + ks[:, None], mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0
        )
        acc += tl.dot(x, wt, input_precision="ieee")
    acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    acc = tl.where(acc < 0.0, 0.0, acc)
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            x2 = x.contiguous()
            w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
            M, K = x2.shape
            N = w.shape[0]
            out = torch.empty((M, N), device=x.device, dtype=x.dtype)
            grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
            _linear_bias_relu[grid](x2, w, b, out, M, N, K, BLOCK=32, BLOCK_K=24)
            return out
        except Exception:
            return F.relu(F.linear(x, self.linear.weight, self.linear.bias))
