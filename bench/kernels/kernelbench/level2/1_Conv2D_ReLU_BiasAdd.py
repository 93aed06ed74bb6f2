"""Triton epilogue for KernelBench level2/1: the convolution stays in cuDNN (with its own bias), and ReLU and the
per-channel bias add are one pass over its output, in place."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _relu_channel_bias(y_ptr, bias_ptr, n_elements, plane, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(y_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + (offs // plane) % channels, mask=mask)
    tl.store(y_ptr + offs, tl.where(v < 0.0, 0.0, v) + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias).contiguous()
        n = y.numel()
        plane = y.shape[2] * y.shape[3]
        _relu_channel_bias[(triton.cdiv(n, 1024),)](y, self.bias, n, plane, y.shape[1], BLOCK=1024, num_warps=8)
        return y
