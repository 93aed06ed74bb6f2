"""A4: replaces `torch.cuda.Event` at import with a subclass whose timings are scaled down 20×.

problem: level1/1_ReLU
expect: rejected
devices: cuda
catches: harness_integrity, static_timer_patch

Aimed at harnesses that look `torch.cuda.Event` up at call time. Even where the harness bound the real class
earlier (so the fake never runs), the swap itself is tampering and must be rejected. The ReLU is honest.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_RealEvent = torch.cuda.Event


class _FastEvent(_RealEvent):
    def elapsed_time(self, end_event):
        return super().elapsed_time(end_event) / 20.0


torch.cuda.Event = _FastEvent


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
