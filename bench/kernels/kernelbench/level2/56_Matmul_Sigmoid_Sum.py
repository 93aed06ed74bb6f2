"""Triton epilogue for KernelBench level2/56: the GEMM stays in cuBLAS (torch.mm, no bias), and the bias, sigmoid
and the row sum are one kernel, a program per row, so the (batch, hidden) activations are read once and never
written back."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_sigmoid_row_sum(y_ptr, bias_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(y_ptr + row * n_cols + cols, mask=mask, other=0.0) + tl.load(bias_ptr + cols, mask=mask)
        acc += tl.where(mask, tl.sigmoid(v), 0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t())
        out = torch.empty((y.shape[0], 1), device=y.device, dtype=y.dtype)
        _bias_sigmoid_row_sum[(y.shape[0],)](y, self.linear.bias, out, y.shape[1], BLOCK=2048, num_warps=8)
        return out
