"""C2: c2_child_runtime_globals with the harness module found under a computed name, to slip past triage.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: harness_integrity

The harness module's timer globals (`_perf`, `_Event`) are rewritten through `sys.modules[computed name]` and
`setattr`: host-timed calls run on a 10× slow clock, event-timed calls report a tenth of each interval. The
ReLU is honest. Nothing in the source names the harness, so only a run-time integrity check can catch it.
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


def _rewire() -> None:
    harness = sys.modules.get(".".join(["services", "child", "run" + "time"]))
    if harness is None:
        return
    real_perf, real_event = getattr(harness, "_pe" + "rf"), getattr(harness, "_Ev" + "ent")
    t0 = real_perf()

    def slow_perf() -> float:
        return t0 + (real_perf() - t0) / 10.0

    class FastEvent(real_event):
        def elapsed_time(self, end_event):
            return super().elapsed_time(end_event) / 10.0

    setattr(harness, "_pe" + "rf", slow_perf)
    setattr(harness, "_Ev" + "ent", FastEvent)


_rewire()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_relu(x)
