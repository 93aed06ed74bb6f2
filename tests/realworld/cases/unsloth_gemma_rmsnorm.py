# Idiom: unslothai/unsloth unsloth/kernels/rms_layernorm.py @ 905d7db690da2bb369122fbdc342e42baf9c124d
# (the Gemma variant: output = normed * (W + 1.0), computed in fp32, with the row's inverse variance from
# tl.math.rsqrt). unsloth is Apache-2.0; idiom only. Written for KernelGym.
"""Gemma RMSNorm, unsloth style: the weight is applied as (1 + W).

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemma_rms_layernorm_forward(Y, Y_row_stride, X, X_row_stride, W, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    X_row = tl.load(X + row_idx * X_row_stride + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0).to(tl.float32)
    row_var = tl.sum(X_row * X_row, axis=0) / n_cols
    inv_var = tl.math.rsqrt(row_var + eps)
    normed = X_row * inv_var
    output = normed * (W_row + 1.0)
    tl.store(Y + row_idx * Y_row_stride + col_offsets, output, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        shape = x.shape
        X = x.reshape(-1, shape[-1])
        Y = torch.empty_like(X)
        _gemma_rms_layernorm_forward[(X.shape[0],)](
            Y,
            Y.stride(0),
            X,
            X.stride(0),
            self.weight,
            X.shape[1],
            self.eps,
            BLOCK_SIZE=triton.next_power_of_2(X.shape[1]),
        )
        return Y.view(shape)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (output * (1.0 + self.weight.float())).type_as(x)


def get_inputs():
    return [torch.randn(2, 6, 96)]


def get_init_inputs():
    return [96]
