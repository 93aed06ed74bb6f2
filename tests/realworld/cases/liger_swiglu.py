# Idiom: linkedin/Liger-Kernel src/liger_kernel/ops/backends/_ascend/ops/swiglu.py @
# c0d85b734e244929b895877c4ae4a2e1de1cc268
# and the Triton backend it mirrors (silu on a.to(tl.float32) via tl.sigmoid, cast back, one program per row,
# program_id promoted to int64 before pointer arithmetic). Liger-Kernel is BSD-2-Clause; idiom only.
"""SwiGLU, Liger style, fp16 activations.

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def _swiglu_forward_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = silu(a_row).cast(b_row.dtype) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        ori_shape = a.shape
        n_cols = ori_shape[-1]
        a = a.view(-1, n_cols)
        b = b.view(-1, n_cols)
        c = torch.empty_like(a)
        BLOCK_SIZE = triton.next_power_of_2(n_cols)
        _swiglu_forward_kernel[(a.shape[0],)](a, b, c, c.stride(-2), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE)
        return c.view(*ori_shape)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.nn.functional.silu(a.float()).half() * b


def get_inputs():
    return [torch.randn(6, 72).half(), torch.randn(6, 72).half()]


def get_init_inputs():
    return []
