# Idiom: unslothai/unsloth unsloth/kernels/geglu.py @ 3e5f06113352d9dc5ac6c65eb0058b5373056139
# (_exact_forward_kernel: f = 0.5 * e * (erf(e * rsqrt(2)) + 1) in fp32, erf from the CUDA libdevice module,
# flat launch with BLOCK_SIZE = 1024). unsloth is Apache-2.0; idiom only. Written for KernelGym.
"""GEGLU (exact erf GELU), unsloth style: tl.extra.cuda.libdevice.erf.

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _exact_forward_kernel(e, g, h, n_elements, BLOCK_SIZE: tl.constexpr):
    block_idx = tl.program_id(0)
    offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    e_row = tl.load(e + offsets, mask=mask, other=0).to(tl.float32)
    g_row = tl.load(g + offsets, mask=mask, other=0)
    f_row = 0.5 * e_row * (tl.extra.cuda.libdevice.erf(e_row * 0.7071067811865476) + 1.0)
    f_row = f_row.to(g_row.dtype)
    tl.store(h + offsets, f_row * g_row, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, gate, up):
        n_elements = gate.numel()
        out = torch.empty_like(gate)
        _exact_forward_kernel[(triton.cdiv(n_elements, 1024),)](gate, up, out, n_elements, BLOCK_SIZE=1024)
        return out


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, gate, up):
        return torch.nn.functional.gelu(gate) * up


def get_inputs():
    return [torch.randn(3, 700), torch.randn(3, 700)]


def get_init_inputs():
    return []
