# Idiom: unslothai/unsloth unsloth/kernels/rms_layernorm.py @ 905d7db690da2bb369122fbdc342e42baf9c124d
# (calculate_settings, `with torch.cuda.device(X.device):` around the launch, rows loaded .to(tl.float32),
# tl.math.rsqrt(row_var + eps), r buffer of inverse variances, normed cast to W's dtype before the weight).
# unsloth is Apache-2.0; idiom only. Written for KernelGym.
"""RMS LayerNorm, unsloth style: launch inside torch.cuda.device(X.device).

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_layernorm_forward(
    Y, Y_row_stride, X, X_row_stride, W, W_row_stride, r, r_row_stride, n_cols, eps, BLOCK_SIZE: tl.constexpr
):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y += row_idx * Y_row_stride
    X += row_idx * X_row_stride
    r += row_idx * r_row_stride
    X_row = tl.load(X + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0)
    row_var = tl.sum(X_row * X_row, axis=0) / n_cols
    inv_var = tl.math.rsqrt(row_var + eps)
    tl.store(r, inv_var)
    normed = X_row * inv_var
    normed = normed.to(W_row.dtype)
    output = normed * W_row
    tl.store(Y + col_offsets, output, mask=mask)


def fast_rms_layernorm(layernorm, X):
    W = layernorm.weight
    eps = layernorm.variance_epsilon
    shape = X.shape
    dim = shape[-1]
    X = X.view(-1, dim)
    n_rows, n_cols = X.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 4 if BLOCK_SIZE < 2048 else 8
    device = X.device
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=device)
    r = torch.empty(n_rows, dtype=torch.float32, device=device)
    with torch.cuda.device(device):
        _rms_layernorm_forward[(n_rows,)](
            Y,
            Y.stride(0),
            X,
            X.stride(0),
            W,
            W.stride(0),
            r,
            r.stride(0),
            n_cols,
            eps,
            BLOCK_SIZE=BLOCK_SIZE,
            num_warps=num_warps,
        )
    return Y.view(*shape)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        return fast_rms_layernorm(self, x)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self, hidden_size, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(var + self.variance_epsilon))


def get_inputs():
    return [torch.randn(3, 4, 80)]


def get_init_inputs():
    return [80]
