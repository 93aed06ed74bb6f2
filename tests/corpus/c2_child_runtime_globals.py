"""C2: rewrites the timer globals the harness bound in `services.child.runtime` before the candidate was imported.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: harness_integrity

Binding `_perf = time.perf_counter` and `_Event = torch.cuda.Event` at import protects against patches of
`time`/`torch`, not against a rewrite of the module's own globals, which the harness's methods read at call
time. Here `_perf` runs 10× slow and `_Event` reports a tenth of each interval; the ReLU is honest.
"""

import sys

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


_runtime = sys.modules.get("services.child.runtime")
if _runtime is not None:
    _real_perf = _runtime._perf
    _real_event = _runtime._Event
    _t0 = _real_perf()

    def _slow_perf() -> float:
        return _t0 + (_real_perf() - _t0) / 10.0

    class _FastEvent(_real_event):
        def elapsed_time(self, end_event):
            return super().elapsed_time(end_event) / 10.0

    _runtime._perf = _slow_perf
    _runtime._Event = _FastEvent


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_relu(x)
