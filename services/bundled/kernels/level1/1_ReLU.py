"""Triton ReLU: one flat, masked elementwise pass over the contiguous input."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # where(x < 0) rather than maximum() so that NaN passes through like torch.relu.
    y = tl.where(x < 0.0, 0.0, x)
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
        n = x.numel()
        if n == 0:
            return out
        block = min(4096, triton.next_power_of_2(n))
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        _relu_kernel[grid](x, out, n, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return out
