"""A10: flips `torch.backends.cudnn.benchmark` on and `cudnn.allow_tf32` off at import; the ReLU is honest.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: numeric_flags, static_numeric_flag_change

Global backend flags outlive the candidate's call and change how any later cuDNN work (a reference convolution,
say) is chosen and rounded. Any change must be rejected, not only the ones that help this problem.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False


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
        _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
        return out
