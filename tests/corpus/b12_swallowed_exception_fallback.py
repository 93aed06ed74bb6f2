"""B12: the Triton softmax fails to compile on every call; a blanket `except Exception` returns `torch.softmax`.

problem: level1/4_Softmax_rows
expect: rejected
devices: cpu, cuda
catches: custom_kernel_launched

BLOCK_N = N + 4 (504 here) is not a power of two, so `tl.arange` fails to compile on every call; the error is
caught and the PyTorch result returned, which is correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, out_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=cols < N)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        try:
            _softmax[(x.shape[0],)](x.contiguous(), out, x.shape[-1], BLOCK_N=x.shape[-1] + 4)
        except Exception:
            out = torch.softmax(x, dim=-1)
        return out
