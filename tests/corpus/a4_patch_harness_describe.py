"""A4: finds the harness's `tensors.describe` through `sys.modules` and makes it run the deferred ReLU.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: harness_integrity

forward returns an unwritten buffer and queues the work; the patched `describe`, which the harness calls on the
output after the timed window closes (and again before delivering it), launches the real Triton kernel first.
The delivered output is right, the timed window holds only an allocation.
forward also launches its kernel with nothing to do, so a per-call launch check is satisfied.
"""

import importlib
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


_PENDING: list = []
_harness_tensors = sys.modules.get("services.protocol.tensors") or importlib.import_module("services.protocol.tensors")
_real_describe = _harness_tensors.describe


def _flush() -> None:
    while _PENDING:
        x, out = _PENDING.pop()
        _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)


def _describe(obj, tensors, _type=type):
    _flush()
    return _real_describe(obj, tensors, _type)


_harness_tensors.describe = _describe


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        _relu[(1,)](x, out, 0, BLOCK=4096)  # a launch inside the call, with nothing to do
        _PENDING.append((x, out))
        return out
