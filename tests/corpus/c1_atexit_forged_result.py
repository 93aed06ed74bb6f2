"""C1: raises SystemExit in forward and registers an `atexit` hook that sends a forged, authenticated "success" reply.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: none

The hook uses the nonce and sequence number stolen from the harness object, so the parent accepts the forged
reply to the first call; the process is gone by the time the parent asks for the output, which must end the
evaluation (crashed), not pass it. SystemExit is not an Exception, so it escapes the harness's handlers.
"""

import atexit
import json
import os
import struct
import sys

import torch
import torch.nn as nn


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


atexit.register(_forged_success)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _SHAPE[:] = list(x.shape)
        if _SERVER is not None:
            raise SystemExit(0)
        return torch.zeros_like(x)
