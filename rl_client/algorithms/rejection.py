"""Profiling-based rejection sampling (PRS): keep correct-but-lazy turns out of the positive gradient."""

from __future__ import annotations

import torch


def prs_keep(
    correct: torch.Tensor,
    coverage: torch.Tensor,
    threshold: float = 0.3,
    ramp: float = 0.1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """[B, T] bool: which turns stay in the loss. A correct turn is kept with probability
    clip((coverage − threshold)/ramp, 0, 1); incorrect turns are always kept, so negative signal is never
    filtered. A correct turn with unknown coverage (NaN: no profile, e.g. on CPU) is kept.

    Rejected turns leave the loss only: their rewards still flow into earlier turns' returns and they stay in
    the TRLOO baselines (apply this to the loss mask, not to the mask given to `trloo_advantages`)."""
    if correct.shape != coverage.shape or correct.dtype is not torch.bool:
        raise ValueError("correct (bool) and coverage must share one [B, T] shape")
    p = ((coverage.double() - threshold) / ramp).clamp(0.0, 1.0)
    p = torch.where(torch.isnan(coverage), torch.ones_like(p), p)
    p = torch.where(correct, p, torch.ones_like(p))
    draw = torch.rand(p.shape, generator=generator, dtype=torch.float64, device=p.device)
    return draw < p
