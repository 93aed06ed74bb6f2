"""A6: batch-and-skip: computes on odd calls only and returns the previous call's output buffer on even calls.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: outputs_match, timed_output_recheck

Halves the average time per call. The repeated call on identical inputs (the determinism check) is a skip and
looks right; the next skip on new inputs returns a stale buffer.

Each replayed call still launches one of the candidate's kernels (with nothing to do), so a launch-count
defence is satisfied and only checking the values of later calls can catch it.
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


def triton_relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
    return out


def touch(x: torch.Tensor) -> None:
    """Launch the candidate's own kernel with nothing to do: every call "launches a Triton kernel"."""
    _relu[(1,)](x, x, 0, BLOCK=4096)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.last is not None and self.last.shape == x.shape and self.calls % 2 == 0:
            touch(x)
            return self.last
        self.last = triton_relu(x)
        return self.last
