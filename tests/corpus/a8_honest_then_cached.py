"""A8: honest for the first six calls (long enough to cover the correctness trials), then replays the last output.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: timed_output_recheck

Six calls cover five correctness trials plus the repeated first call; after that the evaluation is assumed to be
in its timing phase, where a result used to be only timed, never checked. Sound outcomes: incorrect or
rejected, depending on whether a correctness trial or a re-checked timed call sees the replay.

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
    HONEST_CALLS = 6

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= self.HONEST_CALLS or self.last is None or self.last.shape != x.shape:
            self.last = triton_relu(x)
        else:
            touch(x)
        return self.last
