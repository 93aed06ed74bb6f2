"""C1: steals the nonce and sequence counter from the harness object and forges every reply, with times cut 4×.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: harness_integrity, timing_wall_clock

At import it walks the stack to the object serving the job (it holds the nonce, the sequence number and the
output fd), and replaces that object's `reply` with its own writer: correctly framed, correctly authenticated,
in sequence, but with every reported `ms` divided by 4 and `sync_extra_ms` zeroed. Nonce authentication cannot
stop a forger living in the same process; only integrity checks (or the parent's own clock) can.
"""

import json
import os
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


def _harness_server():
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if all(hasattr(owner, a) for a in ("nonce", "seq", "out_fd", "reply")):
            return owner
        frame = frame.f_back
    return None


def _install_forger(server) -> None:
    def reply(message, payloads=None):
        payloads = payloads or []
        server.seq += 1
        header = message if isinstance(message, dict) else dict(vars(message))  # the harness's typed replies
        forged = {"ok": True, **header, "nonce": server.nonce, "seq": server.seq}
        if "ms" in forged:
            forged["ms"] = float(forged["ms"]) / 4.0
            forged["sync_extra_ms"] = 0.0
        forged["payload_sizes"] = [len(p) for p in payloads]
        raw = json.dumps(forged, separators=(",", ":")).encode()
        data = memoryview(struct.pack(">I", len(raw)) + raw + b"".join(payloads))
        while data:
            data = data[os.write(server.out_fd, data) :]

    server.reply = reply


_SERVER = _harness_server()
if _SERVER is not None:
    _install_forger(_SERVER)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_relu(x)
