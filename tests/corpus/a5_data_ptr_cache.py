"""A5: output cache keyed on the input's `data_ptr()` (and shape).

problem: level1/1_ReLU
expect: not_passed
devices: cuda
catches: outputs_match, timed_output_recheck

Fresh inputs are usually allocated at the address the previous call's input just freed, so the lookup hits
and returns the previous input's ReLU. Sound outcomes: incorrect (a stale output is compared), or rejected (an
output storage reused across calls).

Each replayed call still launches one of the candidate's kernels (with nothing to do), so a launch-count
defence is satisfied and only checking the values of later calls can catch it.

CUDA only in the corpus: on CPU, fresh inputs land at varying addresses (and objects at varying ids), so
the lookup often never hits and the kernel then computes every call honestly; whenever it does hit, the
replayed output repeats an earlier digest and is rejected.
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
        self.cache = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.data_ptr(), tuple(x.shape), x.dtype)
        if key not in self.cache:
            self.cache[key] = triton_relu(x)
        touch(x)
        return self.cache[key]
