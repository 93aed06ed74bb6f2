"""Sampling answers from a Hugging Face causal LM, keeping the tokens and their rollout log-probabilities."""

from __future__ import annotations

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
    def __init__(self, model: Any, tokenizer: Any, device: str, temperature: float, top_p: float, max_new_tokens: int):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    @torch.no_grad()
    def generate(self, histories: list[list[dict[str, str]]]) -> tuple[list[str], list[Sample]]:
        answers, samples = [], []
        self.model.eval()
        eos = self.tokenizer.eos_token_id
        for messages in histories:
            prompt = self.prompt_ids(messages)
            out = self.model.generate(
                torch.tensor([prompt], device=self.device),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long, device=self.device),
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                top_k=0,
                max_new_tokens=self.max_new_tokens,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos,
            )
            response = out.sequences[0, len(prompt) :].tolist()
            if eos is not None and eos in response:
                response = response[: response.index(eos) + 1]
            scores = torch.stack([s[0] for s in out.scores[: len(response)]]).float()
            logprobs = torch.log_softmax(scores, dim=-1).gather(
                1, torch.tensor(response, device=scores.device)[:, None]
            )
            samples.append(Sample(prompt, response, logprobs[:, 0].cpu()))
            answers.append(self.tokenizer.decode(response, skip_special_tokens=True))
        return answers, samples

    def token_logprobs(self, sample: Sample) -> torch.Tensor:
        """Log-probabilities of the response tokens under the current weights (with gradient if enabled), at the
        sampling temperature, so that they are comparable with the rollout's."""
        ids = torch.tensor([sample.prompt_ids + sample.response_ids], device=self.device)
        logits = self.model(ids).logits[0, len(sample.prompt_ids) - 1 : -1].float() / self.temperature
        target = torch.tensor(sample.response_ids, device=self.device)
        return torch.log_softmax(logits, dim=-1).gather(1, target[:, None])[:, 0]
