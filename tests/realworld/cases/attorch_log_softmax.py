# Idiom: BobMcDear/attorch attorch/softmax_kernels.py @ 3da6ee9f8382a57ed46db9fdec05ab8154b55a6b
# (2-D batch x feature tiles from heuristics, a `log` constexpr flag selecting log-softmax, max subtracted with
# -inf padding, tl.log of the row sum). attorch is MIT; idiom only. Written for KernelGym.
"""Log-softmax, attorch style: constexpr `log` flag on a shared softmax kernel.

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.heuristics(
    {"BLOCK_SIZE_BATCH": lambda args: 2, "BLOCK_SIZE_FEAT": lambda args: triton.next_power_of_2(args["feat_dim"])}
)
@triton.jit
def softmax_forward_kernel(
    input_pointer,
    output_pointer,
    batch_dim,
    feat_dim,
    input_batch_stride,
    input_feat_stride,
    output_batch_stride,
    output_feat_stride,
    log: tl.constexpr,
    BLOCK_SIZE_BATCH: tl.constexpr,
    BLOCK_SIZE_FEAT: tl.constexpr,
):
    batch_pid = tl.program_id(axis=0)
    batch_offset = batch_pid * BLOCK_SIZE_BATCH + tl.arange(0, BLOCK_SIZE_BATCH)
    feat_offset = tl.arange(0, BLOCK_SIZE_FEAT)
    batch_mask = batch_offset < batch_dim
    feat_mask = feat_offset < feat_dim
    input_pointer += input_batch_stride * batch_offset[:, None] + input_feat_stride * feat_offset[None, :]
    output_pointer += output_batch_stride * batch_offset[:, None] + output_feat_stride * feat_offset[None, :]
    input = tl.load(input_pointer, mask=batch_mask[:, None] & feat_mask[None, :], other=-float("inf"))
    input -= tl.max(input, axis=1)[:, None]
    numerator = tl.exp(input)
    denominator = tl.sum(numerator, axis=1)[:, None]
    if log:  # noqa: SIM108
        output = input - tl.log(denominator)
    else:
        output = numerator / denominator
    tl.store(output_pointer, output, mask=batch_mask[:, None] & feat_mask[None, :])


class ModelNew(torch.nn.Module):
    def forward(self, input):
        batch_dim, feat_dim = input.shape
        output = torch.empty_like(input)
        grid = lambda META: (triton.cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]),)  # noqa: E731
        softmax_forward_kernel[grid](input, output, batch_dim, feat_dim, *input.stride(), *output.stride(), log=True)
        return output


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, input):
        return torch.log_softmax(input, dim=1)


def get_inputs():
    return [torch.randn(7, 90)]


def get_init_inputs():
    return []
