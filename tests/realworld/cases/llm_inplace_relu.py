# Idiom: unslothai/unsloth unsloth/kernels/rope_embedding.py @ 362a9ac1ac2d19bfd2a5bcc4ab344a1a38f1cea3
# (kernels that write their result into the input tensor and return it) applied to a KernelBench-style problem
# whose reference is itself in place (torch.relu_). Written for KernelGym.
"""In-place ReLU kernel for an in-place reference (idempotent: a second call changes nothing).

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def relu_inplace_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        n = x.numel()
        relu_inplace_kernel[(triton.cdiv(n, 256),)](x, n, BLOCK=256)
        return x


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu_(x)


def get_inputs():
    return [torch.randn(3, 333)]


def get_init_inputs():
    return []
