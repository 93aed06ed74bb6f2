"""Sampling answers from a Hugging Face causal LM, keeping the tokens and their rollout log-probabilities."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from rl_client.local import decode
from rl_client.local.decode import tempered_logprobs

MAX_PADDING = 0.1  # the share of a training micro-batch's tokens that may be padding (`LocalPolicy.micro_batches`)


@dataclass
class Sample:
    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: torch.Tensor  # [len(response_ids)], as the sampler saw them


def load_pretrained(
    path: str, gguf_file: str | None = None, dtype: str = "float32", device: str = "cpu"
) -> tuple[Any, Any]:
    """(model, tokenizer) from a local Hugging Face directory, or from the GGUF file `gguf_file` inside `path`
    (transformers dequantizes it; needs the `gguf` package)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype), **kwargs).to(device)
    if gguf_file:
        # transformers 5.15 reads the file's EOS and padding ids into the model config, but its GGUF tokenizer
        # conversion can name other tokens (SmolLM2: <|im_start|> as EOS, no padding); the config is right.
        for role in ("eos", "pad"):
            wanted = getattr(model.config, f"{role}_token_id", None)
            if isinstance(wanted, int) and getattr(tokenizer, f"{role}_token_id") != wanted:
                setattr(tokenizer, f"{role}_token", tokenizer.convert_ids_to_tokens(wanted))
    return model, tokenizer


def pad_id(tokenizer: Any) -> int:
    """The tokenizer's padding id, else its EOS (what fills a padded row never reaches a real token)."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


class LocalPolicy:
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        device: str,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        rollout_dtype: str | None = None,
        batch_size: int = 16,
        train_tokens_per_batch: int = 8192,
    ):
        """With `rollout_dtype` (e.g. "bfloat16" while `model` trains in float32) answers are sampled from a copy of
        the weights in that dtype, refreshed by `sync()`: the rollout engine and the trainer then disagree a little,
        as vLLM and FSDP do, and MRS has a real mismatch to act on. `train_tokens_per_batch` bounds the padded
        tokens (rows × longest prompt + response) of one training forward (`micro_batches`); a longer sample
        goes alone. The activations kept for backward grow with it: at 16,384, SmolLM2-135M training in float32
        held 34–46 GB a process on an H200, too much for seeds side by side on one GPU."""
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.train_tokens_per_batch = train_tokens_per_batch
        self.sampler = model
        if rollout_dtype is not None and getattr(torch, rollout_dtype) != next(model.parameters()).dtype:
            self.sampler = copy.deepcopy(model).to(getattr(torch, rollout_dtype))
            self.sampler.requires_grad_(False)

    @torch.no_grad()
    def sync(self) -> None:
        """Copy the trained weights into the sampler's copy (nothing to do without one)."""
        if self.sampler is self.model:
            return
        for mine, trained in zip(self.sampler.parameters(), self.model.parameters(), strict=True):
            mine.copy_(trained)

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    @torch.no_grad()
    def generate(self, histories: list[list[dict[str, str]]]) -> tuple[list[str], list[Sample]]:
        """One sampled answer per history, `batch_size` histories at a time (left-padded)."""
        answers, samples = [], []
        self.sampler.eval()
        prompts = [self.prompt_ids(messages) for messages in histories]
        for start in range(0, len(prompts), self.batch_size):
            for prompt, response, logprobs in self._sample(prompts[start : start + self.batch_size]):
                samples.append(Sample(prompt, response, logprobs))
                answers.append(self.tokenizer.decode(response, skip_special_tokens=True))
        return answers, samples

    def _sample(self, prompts: list[list[int]]) -> list[tuple[list[int], list[int], torch.Tensor]]:
        pad = pad_id(self.tokenizer)
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        stop = self._stop_ids()
        sampling = decode.Sampling(self.temperature, self.top_p, self.max_new_tokens, stop, pad)
        tokens, logprobs = decode.sample(self.sampler, ids, mask, sampling)
        tokens, logprobs = tokens.tolist(), logprobs.cpu()
        results = []
        for row, prompt in enumerate(prompts):
            response = tokens[row]
            end = next((i + 1 for i, token in enumerate(response) if token in stop), len(response))
            results.append((prompt, response[:end], logprobs[row, :end].clone()))
        return results

    def _stop_ids(self) -> tuple[int, ...]:
        """The model's EOS ids (its generation config's, as `generate` stops on) and the tokenizer's, which ends
        a response here."""
        configured = getattr(self.sampler.generation_config, "eos_token_id", None)
        ids = configured if isinstance(configured, list) else [configured]
        return tuple(sorted({i for i in [*ids, self.tokenizer.eos_token_id] if i is not None}))

    def token_logprobs(self, sample: Sample) -> torch.Tensor:
        """Log-probabilities of the response tokens under the current weights (with gradient if enabled), at the
        sampling temperature, so that they are comparable with the rollout's."""
        return self.padded_logprobs([sample])[0]

    def micro_batches(self, samples: list[Sample]) -> list[list[int]]:
        """Indices into `samples`, grouped for `padded_logprobs`: by length, shortest first, a group taking the next
        sample while its rows × longest sequence stay within `train_tokens_per_batch` and at most `MAX_PADDING` of
        those tokens are padding (which costs as much as real tokens once the forward is no longer launch-bound)."""
        order = sorted(range(len(samples)), key=lambda i: len(samples[i].prompt_ids) + len(samples[i].response_ids))
        groups: list[list[int]] = []
        real = 0  # the last group's tokens
        for i in order:
            width = len(samples[i].prompt_ids) + len(samples[i].response_ids)  # the group's longest: sorted
            padded = (len(groups[-1]) + 1) * width if groups else 0
            if groups and padded <= self.train_tokens_per_batch and real + width >= (1 - MAX_PADDING) * padded:
                groups[-1].append(i)
                real += width
            else:
                groups.append([i])
                real = width
        return groups

    def padded_logprobs(self, samples: list[Sample]) -> list[torch.Tensor]:
        """`token_logprobs` of each sample (with gradient if enabled), from one forward of them all. Rows are
        right-padded, so each real token keeps the position it has alone (0, 1, ...) and every key the causal mask
        lets it see is a real token of its row: a padding mask would change only the padding's outputs, which are
        dropped, so none is passed and attention keeps its causal kernels (on a CPU, twice as fast as with a mask
        on long rows; tests/rl_client/test_rl_local_batched_update.py checks the logits against both). Logits are
        kept from the first position any response needs."""
        seqs = [s.prompt_ids + s.response_ids for s in samples]
        width = max(map(len, seqs))
        pad = pad_id(self.tokenizer)
        ids = torch.tensor([q + [pad] * (width - len(q)) for q in seqs], device=self.device)
        positions = torch.arange(width, device=self.device).expand(len(seqs), width)
        first = min(len(s.prompt_ids) for s in samples) - 1  # the logits at position p - 1 predict token p
        out = self.model(input_ids=ids, position_ids=positions, logits_to_keep=width - first)
        rows = [i for i, s in enumerate(samples) for _ in s.response_ids]
        cols = [len(s.prompt_ids) - 1 - first + k for s in samples for k in range(len(s.response_ids))]
        index = torch.tensor([rows, cols], dtype=torch.long, device=self.device).reshape(2, -1)
        logits = out.logits[index[0], index[1]]
        tokens = torch.tensor([t for s in samples for t in s.response_ids], dtype=torch.long, device=self.device)
        flat = tempered_logprobs(logits.float(), self.temperature, tokens)
        return list(flat.split([len(s.response_ids) for s in samples]))

    def batched_logprobs(self, samples: list[Sample]) -> list[torch.Tensor]:
        """`token_logprobs` of each sample, in the order given, one `padded_logprobs` per micro-batch."""
        result: list[torch.Tensor] = [torch.zeros(0)] * len(samples)
        for group in self.micro_batches(samples):
            for i, logprobs in zip(group, self.padded_logprobs([samples[i] for i in group]), strict=True):
                result[i] = logprobs
        return result
