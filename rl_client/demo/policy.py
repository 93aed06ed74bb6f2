"""The demo's policy: a 2-layer GPT-2 with a tokenizer built from the texts it will see, primed by supervised
training to answer each problem with a chosen mixture of the candidate answers.

The tokenizer is character-level (so any text can be read and any text sampled) plus, the way a BPE vocabulary
holds frequent words, longer pieces of the texts the demo will see: the chat roles, each paragraph of the prompts
(the instructions, the reference source, the service's feedback) and each code block of the candidate answers
(the imports, a kernel, a `ModelNew`). A prompt is then a few dozen tokens and an answer three to five, so that
priming and training steps take seconds on a CPU. Choosing an answer is still a sequence of token choices (whether
to import Triton, which kernel, which forward), and a sampled answer can still be anything, a typo included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def build_tokenizer(prompts: list[str], pieces: list[str]) -> Any:
    """Characters (ids 0-2: pad, unk, eos), the chat roles, every paragraph of `prompts` (with the blank line that
    ends it) and every string of `pieces` as one token each."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab = {tok: i for i, tok in enumerate(["<pad>", "<unk>", "<eos>", *chars])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>", chat_template=CHAT_TEMPLATE
    )
    added = {f"<{role}>" for role in ("system", "user", "assistant")} | set(pieces)
    added |= {paragraph for text in prompts for paragraph in re.split(r"(?<=\n\n)", text)}
    tokenizer.add_tokens(sorted(p for p in added if len(p) > 1))
    return tokenizer


def tiny_gpt2(vocab_size: int, positions: int, seed: int) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    # No dropout: it would make π_train differ from π_rollout on every token (and MRS reject every trajectory).
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=positions,
        n_embd=64,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=0,
    )
    return GPT2LMHeadModel(config)


@dataclass(frozen=True)
class Target:
    """Priming data: after `messages`, answer `answer` with probability `p`; `tag` names it for reports."""

    messages: list[dict[str, str]]
    answer: str
    p: float
    tag: tuple[str, ...] = ()


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _batch(tokenizer: Any, targets: list[Target], device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ids, the answer-token mask (what the loss counts) and the weights p."""
    rows = []
    for t in targets:
        prompt = prompt_ids(tokenizer, t.messages)
        answer = [*tokenizer.encode(t.answer, add_special_tokens=False), tokenizer.eos_token_id]
        rows.append((prompt + answer, [0] * len(prompt) + [1] * len(answer)))
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r, _ in rows], device=device)
    scored = torch.tensor([m + [0] * (width - len(m)) for _, m in rows], device=device, dtype=torch.bool)
    weights = torch.tensor([t.p for t in targets], device=device)
    return ids, scored, weights


def answer_logprobs(model: Any, ids: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    """[N] log-probability of each row's answer tokens given what precedes them."""
    logits = model(ids).logits[:, :-1].float()  # right padding: no real token attends to a pad
    logp = torch.log_softmax(logits, dim=-1).gather(2, ids[:, 1:, None])[..., 0]
    return (logp * scored[:, 1:]).sum(dim=1)


def prime(model: Any, tokenizer: Any, targets: list[Target], steps: int, lr: float = 3e-3) -> torch.Tensor:
    """Fit the mixture: minimise Σ p·NLL(answer | messages) over all targets (full batch, Adam), whose optimum is
    P(answer | messages) = p. Returns the model's probability of each target's answer afterwards."""
    device = next(model.parameters()).device
    ids, scored, weights = _batch(tokenizer, targets, str(device))
    contexts = len({repr(t.messages) for t in targets})
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = -(weights * answer_logprobs(model, ids, scored)).sum() / contexts
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        return answer_logprobs(model, ids, scored).exp().cpu()
