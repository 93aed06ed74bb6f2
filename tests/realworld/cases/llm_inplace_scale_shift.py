# Idiom: unslothai/unsloth unsloth/kernels/rope_embedding.py @ 362a9ac1ac2d19bfd2a5bcc4ab344a1a38f1cea3
# (an in-place kernel that updates its input and returns it) for a reference that does x.mul_(s).add_(b): not
# idempotent, so a harness that calls the candidate twice on the same tensor without doing the same to the
# reference would see a difference that is not there. Float scalars reach the kernel as arguments.
"""In-place x = x * 0.5 + 1.0 kernel for an in-place, non-idempotent reference.

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_shift_kernel(x_ptr, scale, shift, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * scale + shift, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        n = x.numel()
        scale_shift_kernel[(triton.cdiv(n, 256),)](x, 0.5, 1.0, n, BLOCK=256)
        return x


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        return x.mul_(0.5).add_(1.0)


def get_inputs():
    return [torch.randn(2, 400)]


def get_init_inputs():
    return []
