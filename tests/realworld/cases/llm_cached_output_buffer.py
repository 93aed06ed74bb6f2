# Idiom: pytorch/pytorch torch/_inductor/codegen/wrapper.py @ dd69d6251ace7e9bed1c09e7613eaa9f3404912e
# (buffer reuse keyed by shape and dtype, as generated wrappers and hand-written CUDA-graph friendly modules do:
# an output buffer allocated once and written again on every call) on a fused bias + GELU kernel. Written for
# KernelGym.
"""Bias + GELU into a cached, reused output buffer (a legitimate optimisation).

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def bias_gelu_kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs % N, mask=mask)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(features))
        self._buffers_by_key = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype)
        y = self._buffers_by_key.get(key)
        if y is None:
            y = self._buffers_by_key[key] = torch.empty_like(x)
        n = x.numel()
        bias_gelu_kernel[(triton.cdiv(n, 512),)](x, self.bias, y, n, x.shape[-1], BLOCK=512)
        return y


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.nn.functional.gelu(x + self.bias)


def get_inputs():
    return [torch.randn(6, 130)]


def get_init_inputs():
    return [130]
