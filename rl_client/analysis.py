"""Monte-Carlo check of the advantage estimators' bias (used by the tests and `bench/rl_bias.py`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Estimator = Callable[..., torch.Tensor]


def expected_gradient(
    estimator: Estimator, group_sizes: Sequence[int], groups: int = 100_000, seed: int = 0
) -> list[float]:
    """The estimator's expected per-turn policy gradient, relative to the true gradient (1.0 = unbiased).

    Policy: one Bernoulli action per turn, P(a=1) = σ(θ) at θ = 0; a turn's reward is its action, so the true
    gradient of each turn's expected reward is σ'(0) = 0.25. Trajectory i of a group takes part in turn t only
    if i < group_sizes[t], so groups shrink from turn to turn as trajectories end, as in multi-turn training.
    Each turn is credited with its own reward (γ = 0) to isolate the baseline's effect.
    """
    gen = torch.Generator().manual_seed(seed)
    n, turns = max(group_sizes), len(group_sizes)
    actions = torch.bernoulli(torch.full((groups, n, turns), 0.5), generator=gen)
    mask = torch.zeros(groups, n, turns, dtype=torch.bool)
    for t, k in enumerate(group_sizes):
        mask[:, :k, t] = True
    ids = torch.arange(groups).repeat_interleave(n).tolist()
    adv = estimator(actions.reshape(-1, turns), mask.reshape(-1, turns), ids, gamma=0.0).reshape(groups, n, turns)
    score = actions - 0.5  # d/dθ log π(a) at θ = 0
    grad = (score * adv * mask).sum(dim=1) / mask.sum(dim=1)
    return (grad.mean(dim=0) / 0.25).tolist()
