"""A1: correct matmul launched on a private side stream that the caller's stream never waits for.

problem: level1/6_Matmul
expect: rejected
devices: cuda
catches: no_side_stream_work, timing_wall_clock

The Triton matmul is right, but it runs, behind a ~1 ms GPU spin, on a `torch.cuda.Stream()` the candidate owns.
The caller's end event fires almost at once; only a device-wide sync or the parent's wall clock sees the work.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + offs_n[None, :], mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0
        )
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.side is None:
            self.side = torch.cuda.Stream(device=a.device)
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        self.side.wait_stream(torch.cuda.current_stream(a.device))  # inputs are ready; never joined back
        with torch.cuda.stream(self.side):
            torch.cuda._sleep(2_000_000)  # about a millisecond the caller's events never see
            _matmul[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return c
