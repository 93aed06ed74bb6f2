"""B4: a Triton kernel that writes zeros: the ReLU of every negative input is right, the positives are not.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: outputs_match
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
        _fill[(triton.cdiv(x.numel(), 4096),)](out, out.numel(), 0.0, BLOCK=4096)
        return out
