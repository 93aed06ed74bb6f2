"""From one token sequence per trajectory (how OpenRLHF stores a multi-turn episode) to turn-level TRLOO
advantages on its tokens. The agent reports each turn's reward in `extra_logs`; the answer spans of a
trajectory are the runs of its action mask (the feedback between them is not an action)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl_client.algorithms import failure_after_success_mask, trloo_advantages, turn_returns


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


def turn_ids(action_mask: torch.Tensor, num_turns: torch.Tensor) -> torch.Tensor:
    """[N, S] long: the turn index (0-based) of each answer token, −1 elsewhere. Row i must have exactly
    `num_turns[i]` answer spans."""
    ids = torch.full(action_mask.shape, -1, dtype=torch.long)
    for i, runs in enumerate(turn_spans(action_mask)):
        if len(runs) != int(num_turns[i]):
            raise ValueError(
                f"trajectory {i}: {len(runs)} answer spans in its action mask but {int(num_turns[i])} turns"
            )
        for t, (a, b) in enumerate(runs):
            ids[i, a:b] = t
    return ids


def turn_rewards(token_rewards: torch.Tensor, action_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """([N, K] rewards, [N] turn counts) from rewards placed on tokens (verl's layout): turn t of a row collects
    every reward from the start of its answer span to the start of the next one, so a reward on the feedback after
    an answer, or on the last token of the sequence, belongs to the last answer before it. NaN stays NaN."""
    spans = turn_spans(action_mask)
    counts = torch.tensor([len(runs) for runs in spans], dtype=torch.long)
    out = torch.zeros(len(spans), max(1, int(counts.max()) if len(spans) else 1), dtype=torch.float64)
    for i, runs in enumerate(spans):
        starts = [a for a, _ in runs] + [token_rewards.shape[1]]
        for t in range(len(runs)):
            out[i, t] = token_rewards[i, starts[t] : starts[t + 1]].double().sum()
    return out, counts


def spread(per_turn: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[N, S]: each token takes its turn's value from `per_turn` [N, K]; tokens outside answers get 0 (False)."""
    padded = torch.cat([per_turn, torch.zeros_like(per_turn[:, :1])], dim=1)
    return torch.gather(padded, 1, torch.where(ids >= 0, ids, per_turn.shape[1]))


@dataclass(frozen=True)
class TokenAdvantages:
    advantages: torch.Tensor  # [N, S] each turn's TRLOO advantage on its answer tokens
    returns: torch.Tensor  # [N, S] each turn's return-to-go on its answer tokens
    loss_mask: torch.Tensor  # [N, S] bool: answer tokens of the turns in `in_loss`
    in_baseline: torch.Tensor  # [N, K] bool: turns that exist and are not a failure after success
    in_loss: torch.Tensor  # [N, K] bool: `in_baseline` and `keep`


def token_advantages(
    action_mask: torch.Tensor,
    turn_rewards: torch.Tensor,
    num_turns: torch.Tensor,
    group_ids: Sequence[Any],
    gamma: float = 1.0,
    keep: torch.Tensor | None = None,
    mask_failure_after_success: bool = True,
    judged: torch.Tensor | None = None,
) -> TokenAdvantages:
    """Each turn's TRLOO advantage and return put on its answer tokens, and the loss mask: answer tokens of turns
    that are not a failure after success and that `keep` [N, K] (PRS, the token veto) keeps. `turn_rewards` is
    [N, K]; row i has `num_turns[i]` turns. Turns removed by `keep` still count in the baselines; turns outside
    `judged` [N, K] (`rl_client.algorithms.judged_mask`: the service failed to judge the trajectory) leave both."""
    k = turn_rewards.shape[1]
    exists = torch.arange(k)[None, :] < num_turns[:, None]
    if judged is not None:
        exists &= judged
    base = failure_after_success_mask(turn_rewards, exists) if mask_failure_after_success else exists
    adv = trloo_advantages(turn_rewards, base, group_ids, gamma)
    in_loss = base & (keep if keep is not None else torch.ones_like(base))
    ids = turn_ids(action_mask, num_turns)
    return TokenAdvantages(
        advantages=spread(adv, ids),
        returns=spread(turn_returns(turn_rewards, base, gamma), ids),
        loss_mask=spread(in_loss, ids),
        in_baseline=base,
        in_loss=in_loss,
    )
