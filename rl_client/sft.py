"""The cold start (`kernelgym-rl sft`): supervised fine-tuning on collected trajectories (`rl_client.collect`),
rendered with the model's own chat template, the loss on the assistant's tokens only, so that the model learns
to answer and to use the service's feedback, not to predict the prompts and the feedback.

The checkpoint is a plain Hugging Face directory (model and tokenizer), which `kernelgym-rl collect --hf-model`,
`serve-model` and a training YAML's `model:` load as they are.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl_client.local.policy import pad_id

IGNORE = -100  # the label that takes a token out of the loss (Hugging Face's cross-entropy convention)
STOP_WINDOW = 4  # steps whose mean loss `SFTConfig.stop_loss` is held to: one batch's loss is too noisy to stop on


@dataclass(frozen=True)
class SFTConfig:
    lr: float = 1e-5
    epochs: int = 1
    max_steps: int | None = None  # stop after this many optimizer steps, whatever `epochs` says
    batch_size: int = 4
    max_length: int = 4096  # tokens; longer chats are cut at the end
    max_grad_norm: float = 1.0
    seed: int = 0
    stop_loss: float | None = None  # stop once the last STOP_WINDOW steps' mean loss is at most this


def settled(losses: Sequence[float], stop_loss: float, window: int = STOP_WINDOW) -> bool:
    """Whether the last `window` steps' mean loss is at most `stop_loss`: a cold start that must leave the policy
    something to learn stops at a loss rather than after a fixed number of steps, whose effect depends on the data,
    the batch and the learning rate."""
    return len(losses) >= window and sum(losses[-window:]) / window <= stop_loss


def _render(tokenizer: Any, messages: Sequence[dict[str, str]], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(list(messages), add_generation_prompt=generation_prompt, tokenize=False)


def assistant_labels(
    tokenizer: Any, messages: Sequence[dict[str, str]], learn: Sequence[bool] | None = None
) -> tuple[list[int], list[int]]:
    """(token ids of the whole chat, labels): a label is the token itself on an assistant answer, with the
    end-of-turn text the template puts after it (the model must learn to stop), and IGNORE everywhere else. With
    `learn`, answer k is labelled only where `learn[k]` is true; the others stay in the context, so that a right
    answer after a wrong one and its feedback is learned as a fix, and the wrong one is not learned at all.

    The chat is rendered by the template once per assistant turn, and the text is tokenized in pieces cut at the
    start and the end of each answer: a token never straddles the border between prompt and answer, as in
    generation, where the answer's tokens follow the prompt's."""
    full = _render(tokenizer, messages, generation_prompt=False)
    cuts = [0]
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        start = _render(tokenizer, messages[:i], generation_prompt=True)
        end = _render(tokenizer, messages[: i + 1], generation_prompt=False)
        if not (full.startswith(end) and end.startswith(start) and len(start) >= cuts[-1]):
            raise ValueError("the chat template does not render a chat as an extension of its beginning")
        cuts += [len(start), len(end)]
    cuts.append(len(full))
    ids: list[int] = []
    labels: list[int] = []
    for k in range(len(cuts) - 1):
        piece = tokenizer.encode(full[cuts[k] : cuts[k + 1]], add_special_tokens=False)
        ids += piece
        answer = (k - 1) // 2 if k % 2 == 1 else None  # odd pieces are answers
        learned = answer is not None and (learn is None or (answer < len(learn) and learn[answer]))
        labels += piece if learned else [IGNORE] * len(piece)
    return ids, labels


def examples(
    tokenizer: Any,
    chats: Sequence[Sequence[dict[str, str]]],
    max_length: int,
    learn: Sequence[Sequence[bool]] | None = None,
) -> list[tuple[list, list]]:
    """Each chat as (ids, labels) (`learn[i]`: which of chat i's answers are learned), cut to `max_length`; a chat
    with no answer token left is dropped."""
    out = []
    for i, messages in enumerate(chats):
        ids, labels = assistant_labels(tokenizer, messages, None if learn is None else learn[i])
        ids, labels = ids[:max_length], labels[:max_length]
        if any(label != IGNORE for label in labels[1:]):  # the first token is never predicted
            out.append((ids, labels))
    return out


def collate(batch: Sequence[tuple[list, list]], pad_id: int, device: str) -> dict[str, torch.Tensor]:
    """Right-padded input ids, attention mask and labels (padding is IGNORE)."""
    width = max(len(ids) for ids, _ in batch)
    ids = [x + [pad_id] * (width - len(x)) for x, _ in batch]
    labels = [y + [IGNORE] * (width - len(y)) for _, y in batch]
    mask = [[1] * len(x) + [0] * (width - len(x)) for x, _ in batch]
    return {
        "input_ids": torch.tensor(ids, device=device),
        "attention_mask": torch.tensor(mask, device=device),
        "labels": torch.tensor(labels, device=device),
    }


def assistant_loss(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over the labelled (assistant) tokens of the batch."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].float()
    target = batch["labels"][:, 1:]
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=IGNORE
    )


def train_sft(
    model: Any,
    tokenizer: Any,
    chats: Sequence[Sequence[dict[str, str]]],
    cfg: SFTConfig,
    device: str = "cpu",
    learn: Sequence[Sequence[bool]] | None = None,
) -> list[float]:
    """AdamW on the assistant-token loss (of the answers `learn` names, per chat; all without it), `cfg.epochs`
    shuffled passes (or `cfg.max_steps` steps), ending early once `settled` at `cfg.stop_loss`; returns the loss of
    every step."""
    data = examples(tokenizer, chats, cfg.max_length, learn)
    if not data:
        raise ValueError("no chat has an assistant answer to learn from")
    pad = pad_id(tokenizer)
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    model.train()
    losses: list[float] = []
    for _ in range(cfg.epochs if cfg.max_steps is None else 1 << 30):
        order = rng.sample(data, len(data))
        for start in range(0, len(order), cfg.batch_size):
            if cfg.max_steps is not None and len(losses) >= cfg.max_steps:
                return losses
            loss = assistant_loss(model, collate(order[start : start + cfg.batch_size], pad, device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            losses.append(loss.item())
            if cfg.stop_loss is not None and settled(losses, cfg.stop_loss):
                return losses
    return losses
