"""Triton row softmax: several whole rows per program, max-subtracted exp, normalised in registers."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_rows_kernel(
    x_ptr, out_ptr, M, N, stride_xm, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    mask = row_mask[:, None] & (cols[None, :] < N)
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :], mask=mask, other=float("-inf"))
    x = x.to(tl.float32)
    # Rows past M are entirely masked; give them finite values so no -inf - -inf appears.
    x = tl.where(row_mask[:, None], x, 0.0)
    row_max = tl.max(x, axis=1)
    e = tl.exp(x - row_max[:, None])
    denom = tl.sum(e, axis=1)
    y = e / denom[:, None]
    tl.store(out_ptr + rows64[:, None] * stride_om + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        N = shape[-1]
        x2 = x.contiguous().view(-1, N)
        M = x2.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        if out.numel() > 0:
            block_n = triton.next_power_of_2(N)
            block_m = max(1, min(16, 4096 // block_n, triton.next_power_of_2(M)))
            num_warps = 4 if block_m * block_n <= 4096 else 8
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)
            _softmax_rows_kernel[grid](
                x2, out, M, N, x2.stride(0), out.stride(0),
                BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
            )
        return out.view(shape)
