"""B2: the Triton kernel writes only the first half of the output; the rest is whatever the allocator held.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: outputs_match, deterministic
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        half = x.numel() // 2
        _relu[(triton.cdiv(half, 4096),)](x, out, half, BLOCK=4096)
        return out
