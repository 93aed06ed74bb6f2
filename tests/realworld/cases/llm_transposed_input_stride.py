# Idiom: adityakotha03/tritonLLM output/zeroshot/gpt_oss_20b/level1/16_Matmul_with_transposed_A.py @
# e67d3ed4b918790bfe85e89cbd0ce064f162b0f7 and similar answers that index inputs as if contiguous: the
# wrapper passes x.shape[1] as the row stride and never calls .contiguous(), so a transposed (non-contiguous)
# input is read in the wrong order. Written for KernelGym.
"""Row-wise scale of a transposed input, indexed with the shape instead of the stride.

expect: incorrect
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_scale_kernel(x_ptr, s_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask)
    s = tl.load(s_ptr + row)
    tl.store(y_ptr + row * n_cols + cols, x * s, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, s):
        n_rows, n_cols = x.shape
        y = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
        row_scale_kernel[(n_rows,)](x, s, y, x.shape[1], n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return y


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x, s):
        return x * s[:, None]


def get_inputs():
    return [torch.randn(40, 12).t(), torch.randn(12)]


def get_init_inputs():
    return []
