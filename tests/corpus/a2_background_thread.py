"""A2: forward returns an empty buffer and a new thread fills it with the real ReLU after the call has returned.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: no_new_threads

The thread waits 50 ms before launching the Triton kernel, so it is still alive when the harness looks at the
process's threads, and the timed window sees only an allocation.
"""

import threading
import time

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


def _late(x, out):
    time.sleep(0.05)
    _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        threading.Thread(target=_late, args=(x, out), daemon=True).start()
        return out
