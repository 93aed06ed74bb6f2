"""B12: the Triton launch raises (a missing argument) and the exception is swallowed: the unwritten buffer is returned.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: custom_kernel_launched, outputs_match

Sound outcomes: rejected (no kernel ran during the call) or incorrect (the buffer was never written).
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
        try:
            _relu[(triton.cdiv(x.numel(), 4096),)](x, out, BLOCK=4096)
        except Exception as exc:
            self.last_error = repr(exc)
        return out
