"""A6: returns the same persistent output buffer every call and refills it asynchronously on a side stream.

problem: level1/1_ReLU
expect: rejected
devices: cuda
catches: no_side_stream_work, output_stable_after_return

Like the NVFP4 batch-and-skip case: the buffer handed back is still being written (behind a ~1 ms spin) when the
caller's end event fires. The values are right once the device is idle, and the buffer still holds the previous
call's result at return.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None
        self.buf = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        if self.side is None:
            self.side = torch.cuda.Stream(device=x.device)
        if self.buf is None or self.buf.shape != x.shape:
            self.buf = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(self.side):
            torch.cuda._sleep(2_000_000)
            _relu[(triton.cdiv(x.numel(), 4096),)](x, self.buf, x.numel(), BLOCK=4096)
        return self.buf
