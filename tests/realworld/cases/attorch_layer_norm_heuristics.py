# Idiom: BobMcDear/attorch attorch/layer_norm_kernels.py @ 552dd13c5e15b6713437e776a7b8d0faec4f167e
# (@triton.heuristics for BLOCK_SIZE_BATCH / BLOCK_SIZE_FEAT from next_power_of_2(feat_dim), 2-D tiles over
# batch and features, mean/var with tl.where on the feature mask, tl.rsqrt(var + eps), affine weight and bias).
# attorch is MIT; idiom only. Written for KernelGym.
"""LayerNorm, attorch style: heuristics-chosen 2-D blocks, float eps.

expect: passed
"""

import torch
import triton
import triton.language as tl


def BLOCK_SIZE_BATCH_heuristic(args):
    return min(max(1, triton.next_power_of_2(args["batch_dim"] // 4)), 4)


@triton.heuristics(
    {
        "BLOCK_SIZE_BATCH": BLOCK_SIZE_BATCH_heuristic,
        "BLOCK_SIZE_FEAT": lambda args: triton.next_power_of_2(args["feat_dim"]),
    }
)
@triton.jit
def layer_norm_forward_kernel(
    input_pointer,
    weight_pointer,
    bias_pointer,
    output_pointer,
    batch_dim,
    feat_dim,
    input_batch_stride,
    input_feat_stride,
    output_batch_stride,
    output_feat_stride,
    eps,
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
    input = tl.load(input_pointer, mask=batch_mask[:, None] & feat_mask[None, :]).to(tl.float32)
    mean = tl.sum(input, axis=1) / feat_dim
    diff = tl.where(feat_mask[None, :], input - mean[:, None], 0)
    inv_std = tl.rsqrt(tl.sum(diff * diff, axis=1) / feat_dim + eps)
    output = diff * inv_std[:, None]
    weight = tl.load(weight_pointer + feat_offset, mask=feat_mask)
    bias = tl.load(bias_pointer + feat_offset, mask=feat_mask)
    output = output * weight + bias
    tl.store(output_pointer, output, mask=batch_mask[:, None] & feat_mask[None, :])


class ModelNew(torch.nn.LayerNorm):
    def forward(self, input):
        flattened_input = input.flatten(0, -2)
        batch_dim, feat_dim = flattened_input.shape
        output = torch.empty_like(flattened_input)
        grid = lambda META: (triton.cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]),)  # noqa: E731
        layer_norm_forward_kernel[grid](
            flattened_input,
            self.weight,
            self.bias,
            output,
            batch_dim,
            feat_dim,
            *flattened_input.stride(),
            *output.stride(),
            self.eps,
        )
        return output.view_as(input)


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.LayerNorm):
    def forward(self, input):
        return torch.nn.functional.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(3, 7, 50)]


def get_init_inputs():
    return [50]
