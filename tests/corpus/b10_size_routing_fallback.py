"""B10: a Triton kernel for the published sizes only; any other size is routed to PyTorch.

problem: level1/1_ReLU
expect: rejected
policy: strict
devices: cpu, cuda
catches: custom_kernel_launched
uncaught_by_default: its Triton kernel computes every output at the published sizes, the only ones checked by default

Every benchmarked call launches the custom kernel, so launch, coverage and output-dependence checks on the
published sizes alone pass; on other sizes no custom kernel runs, which only the `strict` policy (or a problem with
`shape_general = True`) looks at.
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
        if tuple(x.shape) != (64, 1000):
            return torch.relu(x)
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x.contiguous(), out, x.numel(), BLOCK=1024)
        return out
