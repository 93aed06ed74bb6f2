"""B4: softmax answered with the constant 1/N in every entry (the "uniform" degenerate output).

problem: level1/4_Softmax_rows
expect: incorrect
devices: cpu, cuda
catches: outputs_match

Rows sum to one and every value is tiny (1/500 = 0.002), which passes loose absolute tolerances; the inputs are
scaled by 3, so the real softmax is far from uniform.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fill(out_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full((BLOCK,), 0.0, tl.float32) + value, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _fill[(triton.cdiv(out.numel(), 4096),)](out, out.numel(), 1.0 / x.shape[-1], BLOCK=4096)
        return out
