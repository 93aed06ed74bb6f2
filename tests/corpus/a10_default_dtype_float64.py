"""A10: calls `torch.set_default_dtype(torch.float64)` at import; the ReLU kernel still returns fp32.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: numeric_flags, static_numeric_flag_change

A changed default dtype silently changes every tensor the process creates afterwards (inputs drawn with
`torch.randn`, a reference computed in-process). The flag change itself must be rejected.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.set_default_dtype(torch.float64)


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float32).contiguous()
        out = torch.empty(x.shape, device=x.device, dtype=torch.float32)
        _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
        return out
