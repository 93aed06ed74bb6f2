"""Candidate sources shared by the tests."""

from __future__ import annotations

import textwrap

from services.problems import bundled_kernel


def bundled_source(problem_id: str) -> str:
    return bundled_kernel(problem_id).read_text()


RELU_PREAMBLE = """
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


def triton_relu(x):
    out = torch.empty_like(x)
    n = x.numel()
    _relu[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
    return out
"""


def relu_candidate(forward_body: str, extra: str = "") -> str:
    """A ReLU candidate whose forward(self, x) runs `forward_body` (with `triton_relu` available)."""
    body = textwrap.indent(textwrap.dedent(forward_body).strip(), " " * 8)
    return (
        RELU_PREAMBLE + textwrap.dedent(extra) + f"\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n{body}\n"
    )
