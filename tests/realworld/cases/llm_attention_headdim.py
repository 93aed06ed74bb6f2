# Idiom: triton-lang/triton python/tutorials/06-fused-attention.py @ dc6ee3ed2cf9b2b436544d6153351f9bc679cc61
# as LLM answers shrink it: one program per (batch*head, query block), keys walked in blocks with an online softmax,
# and the head dimension taken as a constexpr from q.shape[-1] so that tl.arange(0, HEAD_DIM) is legal. Written for
# KernelGym.
"""Attention forward with tl.arange(0, HEAD_DIM): specialised to the published head dimension (32).

expect: passed
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd(Q, K, V, Out, sm_scale, seq_len, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    base = off_hz * seq_len * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < seq_len, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, seq_len, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_mask = offs_n[:, None] < seq_len
        k = tl.load(K + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=kv_mask, other=0.0)
        qk = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        qk = tl.where(offs_n[None, :] < seq_len, qk, -float("inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=offs_m[:, None] < seq_len)


class ModelNew(torch.nn.Module):
    def forward(self, q, k, v):
        B, H, S, D = q.shape
        o = torch.empty_like(q)
        grid = (triton.cdiv(S, 16), B * H)
        _attn_fwd[grid](q, k, v, o, D**-0.5, S, HEAD_DIM=D, BLOCK_M=16, BLOCK_N=16)
        return o


# === reference ===
import torch  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(1, 2, 40, 32), torch.randn(1, 2, 40, 32), torch.randn(1, 2, 40, 32)]


def get_init_inputs():
    return []
