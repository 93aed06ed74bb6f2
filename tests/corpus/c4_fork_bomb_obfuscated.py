"""C4: the bounded fork bomb of c4_fork_bomb with `os.fork` reached by computed names, so it really runs.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: no_child_processes, sandbox_violation

Triage cannot resolve the call, so the run-time limits (process cap, watchdog, session kill) must stop it.
At most 200 children, each sleeping 30 s and then calling `os._exit`, never running harness code.
"""

import importlib
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


def triton_relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
    return out


MAX_FORKS = 200


def _fork_children() -> int:
    system = importlib.import_module("o" + "s")
    fork, leave = getattr(system, "fo" + "rk"), getattr(system, "_ex" + "it")
    forked = 0
    for _ in range(MAX_FORKS):
        try:
            pid = fork()
        except OSError:
            break
        if pid == 0:
            try:
                time.sleep(30)
            finally:
                leave(0)
        forked += 1
    return forked


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.forked = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.forked:
            self.forked = _fork_children()
        return triton_relu(x)
