# Idiom: adityakotha03/tritonLLM output/zeroshot/gpt-5/40_LayerNorm.py @ a92157f4f16fe225a1b9bee5634f5a7ed1706ae6
# (an LLM answer to KernelBench level1/40_LayerNorm: three kernels - atomic partial sums into zeroed buffers, a
# mean/rstd kernel taking a float eps, an autotuned apply kernel - and a wrapper that falls back to F.layer_norm
# when `not x.is_cuda`). Written for KernelGym.
"""LayerNorm from a GPT-5 agent run: atomics + autotune + an is_cuda fallback to PyTorch.

expect: passed
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _partial_sums_kernel(x_ptr, sum_ptr, sumsq_ptr, M, K, BLOCK_SIZE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_t = tl.program_id(1)
    offsets = pid_t * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < K
    x = tl.load(x_ptr + pid_m * K + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.atomic_add(sum_ptr + pid_m, tl.sum(x, axis=0))
    tl.atomic_add(sumsq_ptr + pid_m, tl.sum(x * x, axis=0))


@triton.jit
def _mean_rstd_kernel(sum_ptr, sumsq_ptr, mean_ptr, rstd_ptr, M, K, eps):
    pid = tl.program_id(0)
    s = tl.load(sum_ptr + pid)
    s2 = tl.load(sumsq_ptr + pid)
    mean = s / K
    var = tl.maximum(s2 / K - mean * mean, 0.0)
    tl.store(mean_ptr + pid, mean)
    tl.store(rstd_ptr + pid, 1.0 / tl.sqrt(var + eps))


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 64}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 128}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=8),
    ],
    key=["K"],
)
@triton.jit
def _apply_kernel(x_ptr, y_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, M, K, BLOCK_SIZE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_t = tl.program_id(1)
    offsets = pid_t * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < K
    x = tl.load(x_ptr + pid_m * K + offsets, mask=mask, other=0.0).to(tl.float32)
    y = (x - tl.load(mean_ptr + pid_m)) * tl.load(rstd_ptr + pid_m)
    y = y * tl.load(w_ptr + offsets, mask=mask, other=1.0) + tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + pid_m * K + offsets, y, mask=mask)


def triton_layer_norm(x, normalized_shape, weight, bias, eps=1e-5):
    if not x.is_cuda:
        return F.layer_norm(x, normalized_shape, weight, bias, eps)
    x = x.contiguous()
    K = 1
    for s in normalized_shape:
        K *= s
    M = x.numel() // K
    y = torch.empty_like(x)
    sum_buf = torch.zeros(M, device=x.device, dtype=torch.float32)
    sumsq_buf = torch.zeros(M, device=x.device, dtype=torch.float32)
    mean_buf = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd_buf = torch.empty(M, device=x.device, dtype=torch.float32)
    _partial_sums_kernel[(M, triton.cdiv(K, 128))](x, sum_buf, sumsq_buf, M, K, BLOCK_SIZE=128)
    _mean_rstd_kernel[(M,)](sum_buf, sumsq_buf, mean_buf, rstd_buf, M, K, eps)
    grid = lambda meta: (M, triton.cdiv(K, meta["BLOCK_SIZE"]))  # noqa: E731
    _apply_kernel[grid](x, y, mean_buf, rstd_buf, weight.contiguous().view(K), bias.contiguous().view(K), M, K)
    return y


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return triton_layer_norm(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias, self.ln.eps)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.rand(4, 6, 5, 9)]


def get_init_inputs():
    return [(6, 5, 9)]
