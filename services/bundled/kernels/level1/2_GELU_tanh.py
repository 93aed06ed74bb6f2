"""Triton tanh-approximate GELU, using 0.5*x*(1+tanh(u)) == x * sigmoid(2u) for a stable single exp."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_tanh_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # u = sqrt(2/pi) * (x + 0.044715 x^3); 0.5 * x * (1 + tanh(u)) = x / (1 + exp(-2u)).
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    # Clamp the exponent so exp never overflows (e^80 is finite in fp32; x / (1 + e^80) is ~0 anyway).
    y = x / (1.0 + tl.exp(tl.minimum(-2.0 * u, 80.0)))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


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
        _gelu_tanh_kernel[grid](x, out, n, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return out
