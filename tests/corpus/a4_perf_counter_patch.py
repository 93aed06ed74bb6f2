"""A4: replaces `time.perf_counter` (and `perf_counter_ns`) at import with a clock that runs 100× slow.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: harness_integrity, static_timer_patch

Any host-timer measurement made through the `time` module after import would shrink 100×. The ReLU is honest.
"""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

_real_perf_counter = time.perf_counter
_real_perf_counter_ns = time.perf_counter_ns
_T0 = _real_perf_counter()
_T0_NS = _real_perf_counter_ns()


def _slow_perf_counter() -> float:
    return _T0 + (_real_perf_counter() - _T0) / 100.0


def _slow_perf_counter_ns() -> int:
    return _T0_NS + (_real_perf_counter_ns() - _T0_NS) // 100


time.perf_counter = _slow_perf_counter
time.perf_counter_ns = _slow_perf_counter_ns


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
