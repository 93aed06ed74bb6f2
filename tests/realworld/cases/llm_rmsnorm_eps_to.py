# Idiom: adityakotha03/tritonLLM output/zeroshot/gpt-5/40_LayerNorm.py @ a92157f4f16fe225a1b9bee5634f5a7ed1706ae6
# and the RMSNorm answers of the same runs: autotune over num_warps only (triton.Config({}, num_warps=w)),
# BLOCK_N = next_power_of_2(N) passed at launch, `assert x.is_cuda and x.device.type == "cuda"`, and the float
# eps cast inside the kernel with `eps.to(tl.float32)` (valid because compiled Triton passes floats as fp32).
"""RMSNorm from an agent run: num_warps-only autotune, device asserts, eps.to(tl.float32).

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (1, 2, 4, 8)], key=["N"])
@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / N
    rstd = 1.0 / tl.sqrt(ms + eps.to(tl.float32))
    tl.store(y_ptr + row * N + cols, x * rstd * w, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.randn(num_features))

    def forward(self, x):
        assert x.is_cuda and x.device.type == "cuda", "expected a CUDA tensor"
        x2 = x.contiguous().view(-1, x.shape[-1])
        y = torch.empty_like(x2)
        N = x2.shape[1]
        rmsnorm_kernel[(x2.shape[0],)](x2, self.weight, y, N, self.eps, BLOCK_N=triton.next_power_of_2(N))
        return y.view_as(x)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.randn(num_features))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(4, 3, 70)]


def get_init_inputs():
    return [70]
