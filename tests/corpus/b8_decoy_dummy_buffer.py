"""B8: launches the Triton kernel every call on a tiny dummy buffer while `torch.relu` computes the real answer.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: output_depends_on_kernels

Every call launches one of the candidate's own kernels, so a launch-count check passes, and on a GPU its kernel
has some share of the GPU time. With the launches of its kernels skipped the output is still right, which is what
the output-dependence check looks for (the strict policy's coverage threshold rejects it too, on a GPU only).
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
    def __init__(self):
        super().__init__()
        self.dummy = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dummy is None or self.dummy.device != x.device:
            self.dummy = torch.zeros(16, device=x.device)
        _relu[(1,)](self.dummy, self.dummy, 16, BLOCK=16)
        return torch.relu(x)
