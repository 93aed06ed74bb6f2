"""Triton fp16 a + b * 0.5: fp16 loads and stores, arithmetic in fp32, one rounding at the end."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_half_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = a + b * 0.5
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        assert a.shape == b.shape, "a and b must have the same shape"
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty(a.shape, device=a.device, dtype=a.dtype)
        n = a.numel()
        if n == 0:
            return out
        block = min(4096, triton.next_power_of_2(n))
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        _add_half_kernel[grid](a, b, out, n, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return out
