"""Triton epilogue for KernelBench level2/9: the GEMM stays in cuBLAS (torch.mm, no bias), and the bias, the
subtraction, the multiplication and ReLU are one pass over its output, in place."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_sub_mul_relu(y_ptr, bias_ptr, n_elements, n_cols, subtract, multiply, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % n_cols, mask=mask)
    v = (v - subtract) * multiply
    tl.store(y_ptr + offs, tl.where(v < 0.0, 0.0, v), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t())
        n = y.numel()
        _bias_sub_mul_relu[(triton.cdiv(n, 1024),)](
            y, self.linear.bias, n, y.shape[1], self.subtract_value, self.multiply_value, BLOCK=1024, num_warps=8
        )
        return y
