"""Triton epilogue for KernelBench level2/12: the GEMM stays in cuBLAS (torch.mm, no bias), and the bias, the
multiplier and LeakyReLU are one pass over its output, in place, instead of three passes."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_scale_leaky(y_ptr, bias_ptr, n_elements, n_cols, multiplier, slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = (tl.load(y_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % n_cols, mask=mask)) * multiplier
    tl.store(y_ptr + offs, tl.where(v < 0.0, v * slope, v), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())
        n = y.numel()
        _bias_scale_leaky[(triton.cdiv(n, 1024),)](
            y, self.gemm.bias, n, y.shape[1], self.multiplier, self.negative_slope, BLOCK=1024, num_warps=8
        )
        return y
