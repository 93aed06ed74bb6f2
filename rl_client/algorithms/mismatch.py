"""Mismatch rejection sampling (MRS): drop trajectories whose training-engine probabilities drifted from the
rollout engine's, instead of re-weighting them."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class MismatchResult:
    keep_tokens: torch.Tensor  # [B, L] bool: response tokens that stay in the loss
    ratio: torch.Tensor  # [B] geometric mean of π_train/π_rollout over each trajectory's response tokens
    kept: torch.Tensor  # [B] bool: trajectories inside the band
    vetoed_turns: torch.Tensor  # [B, T] bool: turns removed by the token veto


def mismatch_rejection(
    train_logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    turn_ids: torch.Tensor,
    low: float = 0.999,
    high: float = 1.001,
    token_veto: float = 1e-4,
) -> MismatchResult:
    """Per trajectory, the geometric mean ρ̄ = exp(mean log(π_train/π_rollout)) over its response tokens (the
    log-mean clamped to ±20); a trajectory is kept only if low ≤ ρ̄ ≤ high. Independently, a turn containing a
    token with ratio below `token_veto` is masked whole.

    `turn_ids` is [B, L]: the turn index (0..T−1) of each response token, −1 for prompt, feedback and padding.
    """
    if not (train_logprobs.shape == rollout_logprobs.shape == turn_ids.shape) or turn_ids.dim() != 2:
        raise ValueError("train_logprobs, rollout_logprobs and turn_ids must share one [B, L] shape")
    response = turn_ids >= 0
    log_ratio = torch.where(
        response, (train_logprobs - rollout_logprobs).double(), torch.zeros((), dtype=torch.float64)
    )
    n = response.sum(dim=1)
    mean = (log_ratio.sum(dim=1) / n.clamp(min=1)).clamp(-20.0, 20.0)
    ratio = torch.exp(mean)
    kept = (n > 0) & (ratio >= low) & (ratio <= high)
    turns = int(turn_ids.max().item()) + 1 if response.any() else 0
    vetoed = torch.zeros(turn_ids.shape[0], turns, dtype=torch.bool, device=turn_ids.device)
    bad = response & (log_ratio < torch.log(torch.tensor(token_veto, dtype=torch.float64)))
    if bad.any():
        rows, cols = bad.nonzero(as_tuple=True)
        vetoed[rows, turn_ids[rows, cols]] = True
    token_vetoed = torch.gather(
        torch.cat([vetoed, torch.zeros_like(vetoed[:, :1])], dim=1), 1, torch.where(response, turn_ids, turns)
    )
    keep_tokens = response & kept[:, None] & ~token_vetoed
    return MismatchResult(keep_tokens=keep_tokens, ratio=ratio.to(train_logprobs.dtype), kept=kept, vetoed_turns=vetoed)
