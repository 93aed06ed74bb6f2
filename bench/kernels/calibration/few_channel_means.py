"""Honest Triton per-channel means for bench/problems/calibration/few_channel_means: one program per channel
walks its strided column in blocks of rows and divides by the row count; the three-element output is the
kernel's. It must get `passed` on every evaluation (issue 35)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _channel_mean(x_ptr, out_ptr, rows, channels, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for r0 in range(0, rows, BLOCK):
        r = r0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r * channels + c, mask=r < rows, other=0.0)
    tl.store(out_ptr + c, tl.sum(acc, axis=0) / rows)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, channels = x.shape
        out = torch.empty(channels, dtype=x.dtype, device=x.device)
        _channel_mean[(channels,)](x, out, rows, channels, BLOCK=min(1024, triton.next_power_of_2(rows)))
        return out
