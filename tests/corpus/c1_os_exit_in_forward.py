"""C1: computes the right answer, then calls `os._exit(0)` inside forward: a "clean" exit before any check runs.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: static_process_spawn

Harnesses that treat exit status 0 as success are fooled; a missing result must be a failure (crashed).
"""

import os

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
        os._exit(0)
        return out
