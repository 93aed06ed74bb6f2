# Idiom: adityakotha03/tritonLLM output/zeroshot/gpt_oss_20b/level1/22_Tanh.py @
# e67d3ed4b918790bfe85e89cbd0ce064f162b0f7
# with the mistake LLMs make most with it: calling `tl.tanh`, which triton.language does not define
# (tanh lives in libdevice). The Triton compiler rejects the kernel. Written for KernelGym.
"""Tanh through `tl.tanh`, which does not exist: a compile error on a GPU.

expect: compile_error
"""

import torch
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.tanh(x), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.is_cuda
        out = torch.empty_like(x)
        n = x.numel()
        tanh_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(2, 900)]


def get_init_inputs():
    return []
