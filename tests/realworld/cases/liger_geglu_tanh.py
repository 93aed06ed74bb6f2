# Idiom: linkedin/Liger-Kernel src/liger_kernel/ops/backends/_triton/geglu.py @ a80440de826086fe1ba864d37bb25f849a37b6c9
# (tanh from triton.language.extra.libdevice, GELU-tanh on a.to(tl.float32) times b, one program per row with
# BLOCK_SIZE from next_power_of_2). Liger-Kernel is BSD-2-Clause; idiom only. Written for KernelGym.
"""GEGLU (tanh approximation), Liger style: libdevice tanh on fp32.

expect: passed
"""

import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import tanh


@triton.jit
def _geglu_tanh_forward_kernel(a, b, c, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a += program_id * stride
    b += program_id * stride
    c += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + col_offsets, mask=mask, other=0)
    sqrt_2_over_pi = 0.7978845608028654
    a_cubed = a_row * a_row * a_row
    tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
    tanh_result = tanh(tanh_arg)
    geglu_a = 0.5 * a_row * (1 + tanh_result)
    c_row = geglu_a.cast(b_row.dtype) * b_row
    tl.store(c + col_offsets, c_row, mask=mask)


def geglu_forward(a, b):
    ori_shape = a.shape
    n_cols = ori_shape[-1]
    a = a.view(-1, n_cols)
    b = b.view(-1, n_cols)
    c = torch.empty_like(a)
    n_rows = a.shape[0]
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    _geglu_tanh_forward_kernel[(n_rows,)](a, b, c, c.stride(-2), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return c.view(*ori_shape)


class ModelNew(torch.nn.Module):
    def forward(self, gate, up):
        return geglu_forward(gate, up)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, gate, up):
        return torch.nn.functional.gelu(gate, approximate="tanh") * up


def get_inputs():
    return [torch.randn(4, 3, 40), torch.randn(4, 3, 40)]


def get_init_inputs():
    return []
