"""Turn-level advantages for multi-turn RL: TRLOO (Dr. Kernel) and GRPO (for comparison)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def turn_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Return-to-go per turn: G[i,t] = Σ_{k≥t, mask[i,k]} γ^(k−t)·r[i,k]; zero where mask is false."""
    _check(rewards, mask)
    r = torch.where(mask, rewards, torch.zeros_like(rewards)).to(torch.float64)
    out = torch.zeros_like(r)
    running = torch.zeros(r.shape[0], dtype=torch.float64, device=r.device)
    for t in range(r.shape[1] - 1, -1, -1):
        running = r[:, t] + gamma * running
        out[:, t] = running
    return torch.where(mask, out, torch.zeros_like(out)).to(rewards.dtype)


def trloo_advantages(
    rewards: torch.Tensor, mask: torch.Tensor, group_ids: Sequence[Any], gamma: float = 1.0
) -> torch.Tensor:
    """Turn-level REINFORCE leave-one-out.

    A[i,t] = G[i,t] − mean of G[j,t] over the other members j ≠ i of i's group with mask[j,t] true; A = G when
    i has no such peer. No std normalisation. The baseline never contains the sample itself, so the expected
    gradient is unbiased whatever the group size at each turn (unlike GRPO, see `grpo_advantages`).
    """
    g = turn_returns(rewards, mask, gamma).to(torch.float64)
    valid = mask.to(torch.float64)
    codes = _group_codes(group_ids, g.shape[0], g.device)
    total = _group_sum(g * valid, codes)  # Σ over the group's valid members, per turn
    others = _group_sum(valid, codes) - valid
    baseline = torch.where(others > 0, (total - g * valid) / others.clamp(min=1), torch.zeros_like(g))
    adv = torch.where(mask, g - baseline, torch.zeros_like(g))
    return adv.to(rewards.dtype)


def grpo_advantages(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    group_ids: Sequence[Any],
    gamma: float = 1.0,
    std_normalize: bool = False,
) -> torch.Tensor:
    """GRPO's group-mean baseline per turn, the sample itself included (the biased estimator, kept for
    comparison): A[i,t] = G[i,t] − mean over the group's valid members at t, divided by their standard
    deviation (+1e-6) when `std_normalize`."""
    g = turn_returns(rewards, mask, gamma).to(torch.float64)
    valid = mask.to(torch.float64)
    codes = _group_codes(group_ids, g.shape[0], g.device)
    count = _group_sum(valid, codes).clamp(min=1)
    mean = _group_sum(g * valid, codes) / count
    adv = g - mean
    if std_normalize:
        var = _group_sum(((g - mean) ** 2) * valid, codes) / count
        adv = adv / (var.sqrt() + 1e-6)
    return torch.where(mask, adv, torch.zeros_like(adv)).to(rewards.dtype)


def _group_codes(group_ids: Sequence[Any], n: int, device: torch.device) -> torch.Tensor:
    """[B] integer code of each trajectory's group."""
    if len(group_ids) != n:
        raise ValueError(f"group_ids has {len(group_ids)} entries for {n} trajectories")
    index: dict[Any, int] = {}
    return torch.tensor([index.setdefault(g, len(index)) for g in group_ids], device=device, dtype=torch.long)


def _group_sum(values: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """[B, T]: for each trajectory, the sum of `values` over its whole group."""
    sums = torch.zeros(int(codes.max()) + 1 if codes.numel() else 0, values.shape[1], dtype=values.dtype)
    sums = sums.to(values.device).index_add_(0, codes, values)
    return sums[codes]


def _check(rewards: torch.Tensor, mask: torch.Tensor) -> None:
    if rewards.dim() != 2 or rewards.shape != mask.shape:
        raise ValueError(f"rewards and mask must both be [B, T]; got {tuple(rewards.shape)} and {tuple(mask.shape)}")
    if mask.dtype is not torch.bool:
        raise TypeError("mask must be a bool tensor")
