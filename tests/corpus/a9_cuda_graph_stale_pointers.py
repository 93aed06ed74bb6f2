"""A9: captures the ReLU in a CUDA graph on the first call and replays it, bound to that first input's storage.

problem: level1/1_ReLU
expect: incorrect
devices: cuda
catches: outputs_match, timed_output_recheck

Replay is fast, but it reads the captured pointer (the first call's input, kept alive), never the new input:
every later call returns the first input's ReLU in the same static buffer.
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


def _launch(x, out):
    _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None
        self.static_x = None
        self.static_out = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.graph is None:
            self.static_x = x.contiguous()  # the captured pointer: this call's input, never refreshed
            self.static_out = torch.empty_like(self.static_x)
            _launch(self.static_x, self.static_out)  # compile outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _launch(self.static_x, self.static_out)
            self.graph = graph
        self.graph.replay()
        return self.static_out
