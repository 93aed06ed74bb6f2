"""Honest control: a CUDA graph captured once and replayed after copying each call's input into its static buffer.

problem: level1/1_ReLU
expect: passed
devices: cuda
catches: none

The legitimate use of graphs (A9 done right): every replay reads this call's data, and the result is cloned out
of the static buffer so no two calls return the same storage.
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
        self.graphs = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (tuple(x.shape), x.dtype, x.device)
        if key not in self.graphs:
            static_x = torch.empty_like(x)
            static_out = torch.empty_like(x)
            _launch(static_x, static_out)  # compile outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _launch(static_x, static_out)
            self.graphs[key] = (graph, static_x, static_out)
        graph, static_x, static_out = self.graphs[key]
        static_x.copy_(x)
        graph.replay()
        return static_out.clone()
