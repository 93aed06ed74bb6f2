# Idiom: linkedin/Liger-Kernel src/liger_kernel/ops/backends/_triton/geglu.py @ a80440de826086fe1ba864d37bb25f849a37b6c9
# with the mistake of dropping its `.to(tl.float32)`: libdevice tanh has fp32 and fp64 overloads only, so an fp16
# argument fails type dispatch when the kernel is compiled. Written for KernelGym.
"""GELU-tanh on fp16 calling libdevice.tanh on an fp16 tensor: no such overload, a compile error on a GPU.

expect: compile_error
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + libdevice.tanh(inner))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        gelu_tanh_kernel[(triton.cdiv(n, 512),)](x, y, n, BLOCK=512)
        return y


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(4, 256).half()]


def get_init_inputs():
    return []
