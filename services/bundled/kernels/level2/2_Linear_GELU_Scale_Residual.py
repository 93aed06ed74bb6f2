"""Triton fused linear -> exact GELU -> scale -> residual add, all in one matmul epilogue."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_gelu_scale_res_kernel(
    x_ptr, w_ptr, bias_ptr, res_ptr, out_ptr, M, N, K, scale,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_rm, stride_rn, stride_om, stride_on,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        k_mask = ks < K
        x = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + ks[None, :] * stride_xk,
            mask=m_mask[:, None] & k_mask[None, :], other=0.0,
        )
        wt = tl.load(
            w_ptr + ks[:, None] * stride_wk + offs_n[None, :] * stride_wn,
            mask=k_mask[:, None] & n_mask[None, :], other=0.0,
        )
        acc += tl.dot(x, wt, input_precision="ieee")
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0)
        acc += bias[None, :]
    # Exact GELU: 0.5 * y * (1 + erf(y / sqrt(2))).
    g = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    out_mask = m_mask[:, None] & n_mask[None, :]
    res = tl.load(
        res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :] * stride_rn, mask=out_mask, other=0.0
    )
    y = g * scale + res
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=out_mask)


def _block(size: int, cap: int) -> int:
    return max(16, min(cap, triton.next_power_of_2(size)))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        bias = self.linear.bias
        K = x.shape[-1]
        N = w.shape[0]
        x2 = x.reshape(-1, K)
        M = x2.shape[0]
        out_shape = (*x.shape[:-1], N)
        res2 = residual.expand(out_shape).reshape(M, N)
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        if out.numel() > 0:
            bm, bn, bk = _block(M, 64), _block(N, 64), _block(K, 32)
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
            _linear_gelu_scale_res_kernel[grid](
                x2, w, bias if bias is not None else w, res2, out, M, N, K, float(self.scale),
                x2.stride(0), x2.stride(1), w.stride(0), w.stride(1),
                res2.stride(0), res2.stride(1), out.stride(0), out.stride(1),
                HAS_BIAS=bias is not None,
                BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=3,
            )
        return out.view(out_shape)
