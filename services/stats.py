"""Timing statistics, reduced in the trusted parent from the raw per-call samples.

The median's 95% confidence interval is distribution-free: the order statistics whose ranks bound the
median with binomial probability 0.95 (normal approximation), so skewed GPU timings need no model.
"""

from __future__ import annotations

import math
import statistics

from services.schema import RuntimeStats

Z95 = 1.959964


def median_ci(samples: list[float]) -> tuple[float, float]:
    xs = sorted(samples)
    n = len(xs)
    if n < 3:
        return xs[0], xs[-1]
    half = Z95 * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - half), 1)
    hi = min(math.ceil(n / 2 + 1 + half), n)
    return xs[lo - 1], xs[hi - 1]


def ci_rel_halfwidth(samples: list[float]) -> float:
    if len(samples) < 3:
        return math.inf
    lo, hi = median_ci(samples)
    med = statistics.median(samples)
    return (hi - lo) / 2 / med if med > 0 else math.inf


def low_quantile(samples: list[float], q: float = 0.2) -> float:
    """A low quantile: robust to the one-sided spikes (preemption, page faults) that a loaded machine adds,
    while a constant per-call cost still shifts it fully."""
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[max(0, round(q * 100) - 1)]


def summarize(samples: list[float]) -> RuntimeStats:
    if not samples:
        raise ValueError("no timing samples")
    q = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else [samples[0]] * 3
    lo, hi = median_ci(samples)
    return RuntimeStats(
        median_ms=statistics.median(samples),
        iqr_ms=q[2] - q[0],
        mean_ms=statistics.fmean(samples),
        min_ms=min(samples),
        trials=len(samples),
        ci95_low_ms=lo,
        ci95_high_ms=hi,
        ci95_rel_halfwidth=ci_rel_halfwidth(samples) if len(samples) >= 3 else None,
    )
