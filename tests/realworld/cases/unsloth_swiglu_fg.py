# Idiom: unslothai/unsloth unsloth/kernels/swiglu.py @ 7e096ff9bff7c6b8feb777ecdfaf40c304e56b2d
# (_fg_kernel: flat 1-D launch over n_elements with a fixed BLOCK_SIZE = 1024, e loaded .to(tl.float32),
# f = e * sigmoid(e) cast to g's dtype, h preallocated with torch.empty). unsloth is Apache-2.0; idiom only.
"""SwiGLU forward, unsloth _fg_kernel style, fp16.

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fg_kernel(e, g, h, n_elements, BLOCK_SIZE: tl.constexpr):
    block_idx = tl.program_id(0)
    offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    e_row = tl.load(e + offsets, mask=mask, other=0).to(tl.float32)
    g_row = tl.load(g + offsets, mask=mask, other=0)
    f_row = e_row * tl.sigmoid(e_row)
    f_row = f_row.to(g_row.dtype)
    h_row = f_row * g_row
    tl.store(h + offsets, h_row, mask=mask)


def swiglu_fg_kernel(e, g):
    batch, seq_len, hd = e.shape
    n_elements = e.numel()
    h = torch.empty((batch, seq_len, hd), dtype=e.dtype, device=e.device)
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    with torch.cuda.device(e.device):
        _fg_kernel[grid](e, g, h, n_elements, BLOCK_SIZE=1024)
    return h


class ModelNew(torch.nn.Module):
    def forward(self, e, g):
        return swiglu_fg_kernel(e, g)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, e, g):
        return torch.nn.functional.silu(e.float()).half() * g


def get_inputs():
    return [torch.randn(2, 5, 120).half(), torch.randn(2, 5, 120).half()]


def get_init_inputs():
    return []
