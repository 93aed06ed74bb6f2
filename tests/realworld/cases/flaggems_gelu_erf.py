# Idiom: FlagOpen/FlagGems src/flag_gems/ops/gelu.py @ 7b16ab717bac3622a007d06542cb18626b7cc101
# (gelu_none / gelu_tanh as @triton.jit device functions on x.to(tl.float32), erf and tanh taken from the
# libdevice extra module, an elementwise launcher around them, approximate="none"|"tanh" chosen in Python).
# FlagGems is Apache-2.0; idiom only. Written for KernelGym.
"""GELU, FlagGems style: device functions using libdevice erf/tanh.

expect: passed
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

erf = libdevice.erf
tanh = libdevice.tanh


@triton.jit
def gelu_none(x):
    scale: tl.constexpr = 0.7071067811
    output = 0.5 * x * (1 + erf(x.to(tl.float32) * scale))
    return output


@triton.jit
def gelu_tanh(x):
    x_fp32 = x.to(tl.float32)
    output = 0.5 * x_fp32 * (1 + tanh(x_fp32 * 0.79788456 * (1 + 0.044715 * x_fp32 * x_fp32)))
    return output


@triton.jit
def gelu_kernel(X, Y, n, APPROX_TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    if APPROX_TANH:  # noqa: SIM108
        y = gelu_tanh(x)
    else:
        y = gelu_none(x)
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


def gelu(A, *, approximate="none"):
    out = torch.empty_like(A)
    n = A.numel()
    gelu_kernel[(triton.cdiv(n, 512),)](A, out, n, APPROX_TANH=approximate == "tanh", BLOCK=512)
    return out


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return gelu(x) + gelu(y, approximate="tanh")


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.nn.functional.gelu(x) + torch.nn.functional.gelu(y, approximate="tanh")


def get_inputs():
    return [torch.randn(1500), torch.randn(1500)]


def get_init_inputs():
    return []
