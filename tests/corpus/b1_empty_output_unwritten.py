"""B1: returns a `torch.empty` output that nothing writes, hoping the allocator hands back the reference's result.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: outputs_match, deterministic

The Sakana trick: a Triton kernel is launched (so launch counters see one) but with zero elements to write.
It works only where the reference ran in the same process and its freed output block is reused un-poisoned.
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
        out = torch.empty_like(x)
        _relu[(1,)](x, out, 0, BLOCK=1024)
        return out
