"""C1: raises SystemExit in forward and registers an `atexit` hook that sends a forged, authenticated "success" reply.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: none

The hook uses the nonce and sequence number stolen from the harness object, so the parent accepts the forged
reply to the first call; the process is gone by the time the parent asks for the output, which must end the
evaluation (crashed), not pass it. SystemExit is not an Exception, so it escapes the harness's handlers.
`atexit` and `SystemExit` are reached through computed names so that static triage lets it run.
"""

import builtins
import importlib
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _harness_server():
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if all(hasattr(owner, a) for a in ("nonce", "seq", "out_fd")):
            return owner
        frame = frame.f_back
    return None


_SERVER = _harness_server()
_SHAPE: list = []


def _forged_success() -> None:
    if _SERVER is None or not _SHAPE:
        return
    tensor = {"t": "tensor", "dtype": "float32", "shape": _SHAPE}
    header = {
        "nonce": _SERVER.nonce,
        "seq": _SERVER.seq + 1,
        "ok": True,
        "structures": [tensor, tensor],
        "inputs": {"t": "list", "items": [tensor]},
        "mutated": False,
        "call_s": 1e-6,
        "payload_sizes": [],
    }
    raw = json.dumps(header, separators=(",", ":")).encode()
    os.write(_SERVER.out_fd, struct.pack(">I", len(raw)) + raw)


@triton.jit
def _zero(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


getattr(importlib.import_module("at" + "exit"), "regis" + "ter")(_forged_success)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _SHAPE[:] = list(x.shape)
        out = torch.empty_like(x)
        _zero[(triton.cdiv(out.numel(), 4096),)](out, out.numel(), BLOCK=4096)
        if _SERVER is not None:
            raise getattr(builtins, "System" + "Exit")(0)
        return out
