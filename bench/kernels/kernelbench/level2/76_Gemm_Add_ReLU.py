"""Triton epilogue for KernelBench level2/76: the bias-free GEMM stays in cuBLAS (torch.mm), and the bias add and
ReLU are one pass over its output, in place."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_relu(y_ptr, bias_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % n_cols, mask=mask)
    tl.store(y_ptr + offs, tl.where(v < 0.0, 0.0, v), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())
        n = y.numel()
        _bias_relu[(triton.cdiv(n, 1024),)](y, self.bias, n, y.shape[1], BLOCK=1024, num_warps=8)
        return y
