"""C4: an infinite Python loop in forward after the answer is computed.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: none

Must end as a timeout within the phase limit, the child killed.
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


def triton_relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
    return out


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = triton_relu(x)
        while True:
            out.add_(0.0)
        return out
