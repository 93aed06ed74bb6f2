"""Triton epilogue for KernelBench level2/59: the GEMM stays in cuBLAS (torch.mm, no bias), and the bias, Swish
and the scaling are one pass over its output, in place, instead of four."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_swish_scale(y_ptr, bias_ptr, n_elements, n_cols, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % n_cols, mask=mask)
    tl.store(y_ptr + offs, v * tl.sigmoid(v) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = torch.mm(x, self.matmul.weight.t())
        n = y.numel()
        _bias_swish_scale[(triton.cdiv(n, 1024),)](
            y, self.matmul.bias, n, y.shape[1], self.scaling_factor, BLOCK=1024, num_warps=8
        )
        return y
