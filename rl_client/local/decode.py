"""Batched sampling from a Hugging Face causal LM with a static KV cache: one prefill, then one decoding step per
token. On a GPU each step is a CUDA graph replay, so the host issues one launch per token instead of the ~1,700
kernels of an eager 30-layer step; on a CPU the same step runs eagerly.

Why: a 135M-parameter model's decoding is bound by the host's per-kernel work, not by the GPU's arithmetic. On an
H200 Hugging Face `generate` took ~26 ms a step in float32 and ~78 ms in float16 and bfloat16; this module's graphed
step takes 5.9 ms in float16 and 7.5 ms in bfloat16 for a batch of 16 (docs/benchmarks.md, the rollout's dtype).
A likely part of the 16-bit figure, not measured apart: the cuDNN attention backend, which torch may try first on
sm90 for 16-bit inputs, builds a new execution graph for every new key length, i.e. at every decoding step.
`rollout_attention()` leaves cuDNN out; the static cache keeps one key length anyway.

Each sampled token's log-probability, log softmax(logits / T)[token], is taken from the very logits that sampled
it, before any top-p filtering (docs/rl.md, "Sampling and MRS"); the [B, steps, vocab] logits are not kept."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    max_new_tokens: int
    stop_ids: tuple[int, ...]  # a row that samples one of these is finished: its later tokens are `pad`
    pad: int


def rollout_attention() -> AbstractContextManager[None]:
    """Scaled dot-product attention without the cuDNN backend (see the module docstring); flash, memory-efficient
    and math kernels remain, so every input still has one."""
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def tempered_logprobs(logits: torch.Tensor, temperature: float, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits / T)[token] per row: the one distribution both rollout and training log-probs are
    taken from (no top-p or top-k filtering, whatever the sampler used)."""
    return torch.log_softmax(logits / temperature, dim=-1).gather(1, tokens[:, None])[:, 0]


@torch.no_grad()
def sample(
    model: Any, ids: torch.Tensor, mask: torch.Tensor, s: Sampling, graphs: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [B, n], their log-probs [B, n]) for left-padded prompts `ids` [B, W] with `mask` (1 on real
    tokens); n ≤ `s.max_new_tokens`, fewer when every row has stopped. `graphs`: replay each step as a CUDA graph
    when `ids` is on a GPU."""
    from transformers import StaticCache

    width = ids.shape[1]
    slots = -(-(width + s.max_new_tokens) // 64) * 64  # a multiple of 64: aligned for the attention kernels
    cache = StaticCache(config=model.config, max_cache_len=slots)
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as `generate` numbers left-padded rows
    with rollout_attention():
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        step = DecodeStep(model, cache, slots, mask, positions[:, -1:] + 1)
        graphs = graphs and ids.is_cuda and all(hasattr(layer, "cumulative_length") for layer in cache.layers)
        return _decode(out.logits[:, -1].float(), step, s, graphs)


class DecodeStep:
    """One decoding step on fixed buffers, so that a CUDA graph of it stays valid: `feed(tokens)` puts the
    sampled tokens at the next cache slot, `run()` returns the next logits [B, vocab] (float32)."""

    def __init__(self, model: Any, cache: Any, slots: int, mask: torch.Tensor, next_position: torch.Tensor):
        self.model, self.cache = model, cache
        self.slot = mask.shape[1]  # the cache slot the next fed token goes to
        dtype = next(model.parameters()).dtype
        # additive, with finfo.min for "masked" as the model's own float masks (-inf would make NaN of a padded
        # query row); the slots past the prompt open one per fed token
        self.bias = torch.full((mask.shape[0], 1, 1, slots), torch.finfo(dtype).min, dtype=dtype, device=mask.device)
        self.bias[:, 0, 0, : self.slot].masked_fill_(mask.bool(), 0.0)
        self.tokens = torch.zeros(mask.shape[0], 1, dtype=torch.long, device=mask.device)
        self.position = next_position.clone()

    def feed(self, tokens: torch.Tensor) -> None:
        self.tokens.copy_(tokens[:, None])
        self.bias[:, 0, 0, self.slot] = 0.0
        self.slot += 1

    def run(self) -> torch.Tensor:
        out = self.model(
            input_ids=self.tokens,
            attention_mask=self.bias,  # 4D: the model takes it as is, no mask building (and no host sync)
            position_ids=self.position,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.position.add_(1)
        return out.logits[:, -1].float()

    def rewind(self) -> None:
        """Undo one `run()`'s cache write position and position ids (after a warm-up run)."""
        self.position.sub_(1)
        for layer in self.cache.layers:
            layer.cumulative_length.sub_(1)


def _decode(logits: torch.Tensor, step: DecodeStep, s: Sampling, graphs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample, feed, step; the first step captures the CUDA graph that the later ones replay."""
    warp = _warpers(s)
    rows = logits.shape[0]
    tokens = torch.full((rows, s.max_new_tokens), s.pad, dtype=torch.long, device=logits.device)
    logprobs = torch.zeros(rows, s.max_new_tokens, device=logits.device)
    live = torch.ones(rows, dtype=torch.bool, device=logits.device)
    stop = torch.tensor(s.stop_ids, dtype=torch.long, device=logits.device)
    run: Callable[[], torch.Tensor] = step.run
    for t in range(s.max_new_tokens):
        chosen = torch.multinomial(torch.softmax(warp(logits), dim=-1), num_samples=1)[:, 0]
        chosen = torch.where(live, chosen, s.pad)
        tokens[:, t] = chosen
        # from the raw logits, as `token_logprobs` trains on: top-p's filtered scores would give every kept token
        # a larger probability than training sees, and MRS would reject every trajectory
        logprobs[:, t] = tempered_logprobs(logits, s.temperature, chosen)
        live &= ~torch.isin(chosen, stop)
        if t + 1 == s.max_new_tokens or not bool(live.any()):
            return tokens[:, : t + 1], logprobs[:, : t + 1]
        step.feed(chosen)
        if t == 0 and graphs:
            run, logits = _graphed(step)
        else:
            logits = run()
    raise AssertionError("unreachable")


def _graphed(step: DecodeStep) -> tuple[Callable[[], torch.Tensor], torch.Tensor]:
    """(a function that replays `step.run` as a CUDA graph, the first step's logits). The step runs once eagerly
    (the warm-up capture needs, on a side stream), is rewound, captured and replayed; if capture fails or the
    replay's logits differ from the eager ones, decoding goes on eagerly from the eager step."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager = step.run()
    torch.cuda.current_stream().wait_stream(side)
    step.rewind()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            out = step.run()  # recorded, not run: the cache and positions stay rewound
        graph.replay()
    except RuntimeError as error:
        log.warning("decoding without CUDA graphs: capture failed (%s)", error)
        return step.run, step.run()
    # the same kernels on the same inputs; a stale buffer would differ by whole logits, not by rounding
    if not torch.allclose(out, eager, rtol=1e-2, atol=1e-1):
        gap = (out - eager).abs().max().item()
        log.warning("decoding without CUDA graphs: the replayed step's logits differ by up to %.3g", gap)
        step.rewind()
        return step.run, step.run()

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay, out


def _warpers(s: Sampling) -> Callable[[torch.Tensor], torch.Tensor]:
    """Temperature, then top-p: the processors `generate` applies for these settings (top_k 0 adds none)."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    steps: list[Any] = []
    if s.temperature != 1.0:
        steps.append(TemperatureLogitsWarper(s.temperature))
    if s.top_p < 1.0:
        steps.append(TopPLogitsWarper(s.top_p))

    def warp(logits: torch.Tensor) -> torch.Tensor:
        for w in steps:
            logits = w(None, logits)
        return logits

    return warp
