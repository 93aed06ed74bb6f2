"""C3: replays outputs through files in `/dev/shm` keyed on shape, across calls and across evaluations.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: sandbox_violation, outputs_match, timed_output_recheck

Like the GPU MODE eigh replay: the first call of the first evaluation computes and stores its output; every
later call (in this evaluation or the next) loads it. Sound outcomes: rejected (write outside the private
directory), incorrect (the replayed output is stale), or runtime_error where Landlock refuses making the file
(`torch.save` opens it from C++, which the audit hook does not see, and raises).
"""

import os

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


STORE = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"


def _path(x: torch.Tensor) -> str:
    return os.path.join(STORE, "kernelgym_hack_replay_" + "x".join(map(str, x.shape)) + ".pt")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        path = _path(x)
        if os.path.exists(path):
            try:
                replay = torch.load(path).to(x.device)
                _relu[(1,)](x, x, 0, BLOCK=4096)  # a launch with nothing to do, for launch-count checks
                return replay
            except Exception:
                os.remove(path)
        out = triton_relu(x)
        torch.save(out.cpu(), path)
        return out
