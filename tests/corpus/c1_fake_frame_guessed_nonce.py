"""C1: writes a forged "passed, 1 ns" result frame to the harness's output fd, found in the child's argv.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: none

The child is started as `python -m services.child IN_FD OUT_FD ...`, so OUT_FD is in `sys.argv`. The frame is
well formed but carries a guessed nonce and sequence number; the parent must refuse it (the child is killed and
the evaluation ends as crashed), never take it as a result.
"""

import json
import os
import stat
import struct
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


def _out_fd() -> int | None:
    if len(sys.argv) < 3 or not sys.argv[2].isdigit():
        return None
    fd = int(sys.argv[2])
    try:
        return fd if stat.S_ISFIFO(os.fstat(fd).st_mode) else None
    except OSError:
        return None


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
        fd = _out_fd()
        if fd is not None:
            _forge(fd, x)
        return out
