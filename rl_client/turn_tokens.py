"""From one token sequence per trajectory (how OpenRLHF stores a multi-turn episode) to turn-level TRLOO
advantages on its tokens. The agent reports each turn's reward in `extra_logs`; the answer spans of a
trajectory are the runs of its action mask (the feedback between them is not an action)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_client.algorithms import failure_after_success_mask, trloo_advantages


def turn_spans(action_mask: torch.Tensor) -> list[list[tuple[int, int]]]:
    """Per row, the [start, end) runs of true values: one per turn."""
    spans = []
    for row in action_mask.bool().tolist():
        runs, start = [], None
        for j, on in enumerate([*row, False]):
            if on and start is None:
                start = j
            elif not on and start is not None:
                runs.append((start, j))
                start = None
        spans.append(runs)
    return spans


def token_advantages(
    action_mask: torch.Tensor,
    turn_rewards: torch.Tensor,
    num_turns: torch.Tensor,
    group_ids: Sequence[Any],
    gamma: float = 1.0,
    keep: torch.Tensor | None = None,
    mask_failure_after_success: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token advantages [N, S] (each turn's TRLOO advantage on its answer tokens) and the loss mask [N, S]
    (answer tokens of turns that stay in the loss: not a failure after success, and `keep` [N, K] — PRS or a
    token veto — where given). `turn_rewards` is [N, K]; row i has `num_turns[i]` turns."""
    k = turn_rewards.shape[1]
    exists = torch.arange(k)[None, :] < num_turns[:, None]
    base = failure_after_success_mask(turn_rewards, exists) if mask_failure_after_success else exists
    adv = trloo_advantages(turn_rewards, base, group_ids, gamma)
    in_loss = base & (keep if keep is not None else torch.ones_like(base))
    token_adv = torch.zeros(action_mask.shape, dtype=turn_rewards.dtype)
    loss_mask = torch.zeros(action_mask.shape, dtype=torch.bool)
    for i, runs in enumerate(turn_spans(action_mask)):
        if len(runs) != int(num_turns[i]):
            raise ValueError(
                f"trajectory {i}: {len(runs)} answer spans in its action mask but {int(num_turns[i])} turns"
            )
        for t, (a, b) in enumerate(runs):
            token_adv[i, a:b] = adv[i, t]
            loss_mask[i, a:b] = bool(in_loss[i, t])
    return token_adv, loss_mask
