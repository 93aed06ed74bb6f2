"""Sampling answers from a Hugging Face causal LM, keeping the tokens and their rollout log-probabilities."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch


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
        out = self.sampler.generate(
            torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device),
            attention_mask=torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device),
            do_sample=True,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=0,
            max_new_tokens=self.max_new_tokens,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=pad,
        )
        results = []
        for row, prompt in enumerate(prompts):
            response = out.sequences[row, width:].tolist()
            if eos is not None and eos in response:
                response = response[: response.index(eos) + 1]
            # The raw logits at the sampling temperature: the distribution `token_logprobs` trains on. The scores
            # after top-p filtering would give every kept token a larger probability than training sees, and MRS
            # would reject every trajectory.
            logits = torch.stack([step[row] for step in out.logits[: len(response)]]).float()
            logprobs = tempered_logprobs(logits, self.temperature, torch.tensor(response, device=logits.device))
            results.append((prompt, response, logprobs.cpu()))
        return results

    def token_logprobs(self, sample: Sample) -> torch.Tensor:
        """Log-probabilities of the response tokens under the current weights (with gradient if enabled), at the
        sampling temperature, so that they are comparable with the rollout's."""
        ids = torch.tensor([sample.prompt_ids + sample.response_ids], device=self.device)
        logits = self.model(ids).logits[0, len(sample.prompt_ids) - 1 : -1].float()
        return tempered_logprobs(logits, self.temperature, torch.tensor(sample.response_ids, device=self.device))


def tempered_logprobs(logits: torch.Tensor, temperature: float, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits / T)[token] per row: the one distribution both rollout and training log-probs are
    taken from (no top-p or top-k filtering, whatever the sampler used)."""
    return torch.log_softmax(logits / temperature, dim=-1).gather(1, tokens[:, None])[:, 0]
