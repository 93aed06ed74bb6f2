"""C1: writes a forged "passed, 1 ns" result frame to the harness's output fd, found among its open pipes.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: none

The child's reply channel is a pipe it holds open for writing: every such descriptor in /proc/self/fd gets the
frame (a child started as `python -m services.child IN_FD OUT_FD ...` also names it in `sys.argv`, a forked one does
not, so the search does not rely on that). The frame is well formed but carries a guessed nonce and sequence
number; the parent must refuse it (the child is killed and the evaluation ends as crashed), never take it as a
result.
"""

import json
import os
import stat
import struct

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


def _out_fds() -> list[int]:
    """Pipes open for writing: the reply channel among them."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
        except (OSError, StopIteration, ValueError):
            continue
        if flags & os.O_ACCMODE == os.O_WRONLY:
            found.append(fd)
    return found


def _forge(fd: int, x: torch.Tensor) -> None:
    structure = {"t": "tensor", "dtype": "float32", "shape": list(x.shape)}
    header = {
        "nonce": "0" * 32,
        "seq": 1,
        "ok": True,
        "verdict": "passed",
        "structures": [structure, structure],
        "structure": structure,
        "ms": 1e-6,
        "sync_extra_ms": 0.0,
        "payload_sizes": [],
    }
    raw = json.dumps(header).encode()
    os.write(fd, struct.pack(">I", len(raw)) + raw)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = triton_relu(x)
        for fd in _out_fds():
            _forge(fd, x)
        return out
