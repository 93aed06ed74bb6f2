"""Sampling answers from a Hugging Face causal LM, keeping the tokens and their rollout log-probabilities."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from rl_client.local import decode
from rl_client.local.decode import tempered_logprobs


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
    ):
        """With `rollout_dtype` (e.g. "bfloat16" while `model` trains in float32) answers are sampled from a copy of
        the weights in that dtype, refreshed by `sync()`: the rollout engine and the trainer then disagree a little,
        as vLLM and FSDP do, and MRS has a real mismatch to act on."""
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
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
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
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
        ids = torch.tensor([sample.prompt_ids + sample.response_ids], device=self.device)
        logits = self.model(ids).logits[0, len(sample.prompt_ids) - 1 : -1].float()
        return tempered_logprobs(logits, self.temperature, torch.tensor(sample.response_ids, device=self.device))
