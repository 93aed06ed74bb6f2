"""Triton RMS norm over the last dim with a learnable weight; several rows per program."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows_kernel(
    x_ptr, w_ptr, out_ptr, M, N, stride_xm, stride_om, eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = (rows[:, None] < M) & col_mask[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=1) / N
    inv = tl.rsqrt(mean_sq + eps)
    y = x * inv[:, None] * w[None, :]
    tl.store(out_ptr + rows64[:, None] * stride_om + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        N = shape[-1]
        x2 = x.contiguous().view(-1, N)
        M = x2.shape[0]
        w = self.weight.contiguous()
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        if out.numel() > 0:
            block_n = triton.next_power_of_2(N)
            block_m = max(1, min(16, 4096 // block_n, triton.next_power_of_2(M)))
            num_warps = 4 if block_m * block_n <= 4096 else 8
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)
            _rmsnorm_rows_kernel[grid](
                x2, w, out, M, N, x2.stride(0), out.stride(0), float(self.eps),
                BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
            )
        return out.view(shape)
