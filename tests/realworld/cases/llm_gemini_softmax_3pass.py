# Idiom: adityakotha03/tritonLLM output/zeroshot/gemini-2.5-pro/23_Softmax.py @ a92157f4f16fe225a1b9bee5634f5a7ed1706ae6
# (an LLM answer to KernelBench level1/23_Softmax: three passes over each row in a loop - max, sum of exp,
# normalise - with an autotuned column block keyed on n_cols, and `assert x.is_cuda` in the wrapper).
"""Row softmax from a Gemini agent run: 3-pass loop, autotune, is_cuda assert.

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE_M": 32}, num_warps=4),
        triton.Config({"BLOCK_SIZE_M": 64}, num_warps=4),
        triton.Config({"BLOCK_SIZE_M": 128}, num_warps=8),
    ],
    key=["n_cols"],
)
@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE_M: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE_M)
    row_max = -float("inf")
    for col_offset in range(0, tl.cdiv(n_cols, BLOCK_SIZE_M)):
        offsets = col_offset * BLOCK_SIZE_M + col_offsets
        mask = offsets < n_cols
        input_block = tl.load(row_start_ptr + offsets, mask=mask, other=-float("inf"))
        row_max = tl.maximum(row_max, tl.max(input_block, axis=0))
    numerator_sum = 0.0
    for col_offset in range(0, tl.cdiv(n_cols, BLOCK_SIZE_M)):
        offsets = col_offset * BLOCK_SIZE_M + col_offsets
        mask = offsets < n_cols
        input_block = tl.load(row_start_ptr + offsets, mask=mask, other=-float("inf"))
        numerator_sum += tl.sum(tl.exp((input_block - row_max).to(tl.float32)), axis=0)
    for col_offset in range(0, tl.cdiv(n_cols, BLOCK_SIZE_M)):
        offsets = col_offset * BLOCK_SIZE_M + col_offsets
        mask = offsets < n_cols
        input_block = tl.load(row_start_ptr + offsets, mask=mask, other=0.0)
        softmax_output = tl.exp((input_block - row_max).to(tl.float32)) / numerator_sum
        tl.store(output_row_start_ptr + offsets, softmax_output, mask=mask)


def triton_softmax(x):
    assert x.is_cuda, "Input tensor must be on a CUDA device."
    assert x.dim() == 2, "Input must be a 2D tensor."
    x = x.contiguous()
    n_rows, n_cols = x.shape
    output = torch.empty_like(x)
    softmax_kernel[lambda meta: (n_rows,)](output, x, x.stride(0), output.stride(0), n_cols)
    return output


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return triton_softmax(x)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(5, 200)]


def get_init_inputs():
    return []
