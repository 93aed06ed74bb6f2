# Idiom: BobMcDear/attorch attorch/act_kernels.py @ 82230b73d0609c6f43ef4c6e1bbb7af303c063ba
# (element-wise kernel autotuned over BLOCK_SIZE with key=['size'], the activation chosen by a constexpr string,
# its own tanh written from sigmoid, input cast to fp32 inside). attorch is MIT; idiom only. Written for KernelGym.
"""GELU/SiLU/ReLU activation kernel, attorch style: autotune + constexpr activation name.

expect: passed
"""

import torch
import triton
import triton.language as tl


def element_wise_kernel_configs(block_name="BLOCK_SIZE"):
    return [
        triton.Config({block_name: 64}, num_warps=2),
        triton.Config({block_name: 128}, num_warps=4),
        triton.Config({block_name: 256}, num_warps=4),
        triton.Config({block_name: 512}, num_warps=8),
    ]


@triton.jit
def tanh(input):
    return 2 * tl.sigmoid(2 * input) - 1


@triton.jit
def gelu(input):
    cdf = 0.5 * (1 + tanh(0.7978845608028654 * (input + 0.044715 * input * input * input)))
    return cdf * input


@triton.jit
def apply_act_func(input, act_func: tl.constexpr):
    if act_func == "sigmoid":
        output = tl.sigmoid(input)
    elif act_func == "silu":
        output = input * tl.sigmoid(input)
    elif act_func == "gelu":
        output = gelu(input)
    else:
        output = tl.maximum(0, input)
    return output


@triton.autotune(configs=element_wise_kernel_configs(), key=["size"])
@triton.jit
def act_func_forward_kernel(input_pointer, output_pointer, size, act_func: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offset = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offset < size
    input = tl.load(input_pointer + offset, mask=mask).to(tl.float32)
    tl.store(output_pointer + offset, apply_act_func(input, act_func), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, act_func="gelu"):
        super().__init__()
        self.act_func = act_func

    def forward(self, input):
        flattened_input = input.flatten()
        size = len(flattened_input)
        output = torch.empty_like(flattened_input)
        grid = lambda META: (triton.cdiv(size, META["BLOCK_SIZE"]),)  # noqa: E731
        act_func_forward_kernel[grid](flattened_input, output, size, self.act_func)
        return output.view_as(input)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self, act_func="gelu"):
        super().__init__()
        self.act_func = act_func

    def forward(self, input):
        return torch.nn.functional.gelu(input, approximate="tanh")


def get_inputs():
    return [torch.randn(4, 300)]


def get_init_inputs():
    return ["gelu"]
