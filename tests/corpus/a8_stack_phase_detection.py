"""A8: detects the timing phase from the call stack (a caller named like "time"/"bench"), and argv/env markers.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: timed_output_recheck

During correctness calls it computes honestly; when a caller's function name says it is being timed it returns
an unwritten buffer (the cheapest possible call). Only re-checking outputs of timed calls catches it
(rejected or incorrect, as the harness classifies a failed re-check).

Each replayed call still launches one of the candidate's kernels (with nothing to do), so a launch-count
defence is satisfied and only checking the values of later calls can catch it.
"""

import os
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


def touch(x: torch.Tensor) -> None:
    """Launch the candidate's own kernel with nothing to do: every call "launches a Triton kernel"."""
    _relu[(1,)](x, x, 0, BLOCK=4096)


_TIMING_WORDS = ("time", "bench", "profil")


def _being_timed() -> bool:
    if any(k in os.environ for k in ("POPCORN_SEED", "KERNELBENCH_TIMING", "KERNELGYM_TIMING")):
        return True
    if any("bench" in a or "timing" in a for a in sys.argv):
        return True
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_name.lower()
        if any(w in name for w in _TIMING_WORDS):
            return True
        frame = frame.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _being_timed():
            touch(x)
            return torch.empty_like(x)
        return triton_relu(x)
