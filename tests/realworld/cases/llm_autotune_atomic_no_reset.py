# Idiom: triton-lang/triton python/triton/runtime/autotuner.py @ fd237c7cf9a7262f32fedbaa5027ab2736ead134
# (`reset_to_zero`, as split-K and column-sum kernels use it, e.g. the atomic partial sums of adityakotha03/tritonLLM
# output/zeroshot/gpt-5/40_LayerNorm.py once autotuned): an autotuned kernel that accumulates into its output with
# tl.atomic_add names that output in reset_to_zero, so the tuning launches do not leave their sums in it.
"""Column sums by atomic_add under autotune without reset_to_zero: the tuning launches add into the output too.

expect: incorrect
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": 8}), triton.Config({"BLOCK_M": 16}), triton.Config({"BLOCK_M": 32})],
    key=["M", "N"],
)
@triton.jit
def colsum_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + cols, tl.sum(x, axis=0), mask=cols < N)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        M, N = x.shape
        out = torch.zeros(N, device=x.device, dtype=torch.float32)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)  # noqa: E731
        colsum_kernel[grid](x, out, M, N, BLOCK_N=triton.next_power_of_2(N))
        return out


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=0)


def get_inputs():
    return [torch.randn(50, 24)]


def get_init_inputs():
    return []
