# Idiom: adityakotha03/tritonLLM output/zeroshot/gpt_oss_20b/level1/22_Tanh.py @
# e67d3ed4b918790bfe85e89cbd0ce064f162b0f7
# (an LLM answer to KernelBench level1/22_Tanh: tanh written as (exp(2x) - 1) / (exp(2x) + 1), BLOCK_SIZE = 2048,
# `assert x.is_cuda`, a grid lambda with hand-written ceiling division). Written for KernelGym.
"""Tanh from a gpt-oss-20b agent run on inputs in [-60, 60]: exp(2x) overflows to inf and inf/inf is NaN.

expect: incorrect
"""

import torch
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    block_start = tl.program_id(0) * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    e2x = tl.exp(2.0 * x)
    t = (e2x - 1.0) / (e2x + 1.0)
    tl.store(out_ptr + offsets, t, mask=mask)


def triton_tanh(x):
    assert x.is_cuda, "Input tensor must be on CUDA."
    x = x.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    BLOCK_SIZE = 2048
    grid = lambda meta: ((n_elements + meta["BLOCK_SIZE"] - 1) // meta["BLOCK_SIZE"],)  # noqa: E731
    tanh_kernel[grid](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return triton_tanh(x)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.rand(3, 1500) * 120 - 60]


def get_init_inputs():
    return []
