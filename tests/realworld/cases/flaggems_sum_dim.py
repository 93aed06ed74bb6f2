# Idiom: FlagOpen/FlagGems src/flag_gems/ops/sum.py @ 3217f5698017213f712ad2a2e82e6efa4c270bab
# (a row reduction autotuned over BLOCK_M / BLOCK_N with key=["M", "N"], a loop over N accumulating in fp32 with
# tl.zeros, tl.sum(axis=1), a grid lambda over BLOCK_M). FlagGems is Apache-2.0; idiom only. Written for KernelGym.
"""Sum over the last dimension, FlagGems style: autotuned 2-D tiles with an fp32 accumulator.

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=4) for m in (4, 8) for n in (64, 128)],
    key=["M", "N"],
)
@triton.jit
def sum_kernel(inp, out, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    inp = inp + rows * N
    out = out + rows
    row_mask = rows < M
    _sum = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)[None, :]
        col_mask = cols < N
        mask = row_mask & col_mask
        a = tl.load(inp + cols, mask, other=0).to(tl.float32)
        _sum += a
    total = tl.sum(_sum, axis=1)[:, None]
    tl.store(out, total, row_mask)


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        shape = list(x.shape)
        N = shape[self.dim]
        M = x.numel() // N
        x2 = x.contiguous().view(M, N)
        out = torch.empty((M,), dtype=x.dtype, device=x.device)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)  # noqa: E731
        sum_kernel[grid](x2, out, M, N)
        shape[self.dim] = 1
        return out.view(shape)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(3, 10, 300)]


def get_init_inputs():
    return [2]
