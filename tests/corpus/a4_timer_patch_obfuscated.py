"""A4: the timer patches of a4_*, with every module and attribute name computed at run time to slip past triage.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: harness_integrity

`time.perf_counter` (100× slow) and `torch.cuda.Event.elapsed_time` (10× short) are replaced through
`sys.modules[...]`/`getattr`/`setattr` with concatenated names, so no name a static scan could resolve appears
in the source. On CUDA the Event patch reaches the harness's own events. Only a run-time integrity check
(comparing the critical callables before import and after every call) can catch it.
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


def _patch() -> None:
    clock = sys.modules["ti" + "me"]
    name = "perf" + "_counter"
    real_clock = getattr(clock, name)
    t0 = real_clock()

    def slow_clock() -> float:
        return t0 + (real_clock() - t0) / 100.0

    setattr(clock, name, slow_clock)

    event_cls = getattr(getattr(torch, "cu" + "da"), "Ev" + "ent")
    method = "elapsed" + "_time"
    real_elapsed = getattr(event_cls, method)

    def short_elapsed(start, end):
        return real_elapsed(start, end) * 0.1

    setattr(event_cls, method, short_elapsed)


_patch()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_relu(x)
