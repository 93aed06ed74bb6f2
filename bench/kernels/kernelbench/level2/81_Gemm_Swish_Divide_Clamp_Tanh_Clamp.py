"""Triton epilogue for KernelBench level2/81: the GEMM stays in cuBLAS (torch.mm, no bias), and the bias, Swish,
the halving, both clamps and tanh are one pass over its output, in place, instead of seven."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_swish_clamp_tanh(y_ptr, bias_ptr, n_elements, n_cols, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(y_ptr + offs, mask=mask)
    if HAS_BIAS:
        v += tl.load(bias_ptr + offs % n_cols, mask=mask)
    v = tl.minimum(tl.maximum(v * tl.sigmoid(v) / 2.0, -1.0), 1.0)
    # tanh(v) = 2 sigmoid(2v) - 1, accurate to ~1e-7 on [-1, 1]; its values already lie in the last clamp's range.
    tl.store(y_ptr + offs, 2.0 * tl.sigmoid(2.0 * v) - 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())
        n = y.numel()
        bias = self.gemm.bias
        _bias_swish_clamp_tanh[(triton.cdiv(n, 1024),)](
            y, y if bias is None else bias, n, y.shape[1], HAS_BIAS=bias is not None, BLOCK=1024, num_warps=8
        )
        return y
