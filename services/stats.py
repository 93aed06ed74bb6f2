"""Timing statistics, reduced in the trusted parent from the raw per-call samples.

The median's 95% confidence interval is distribution-free: the order statistics whose ranks bound the
median with binomial probability at least 0.95 (exact ranks), so skewed GPU timings need no model. Half a
tick of the timer widens it, so samples quantised onto a few ticks cannot look more precise than the clock.
Several processes' medians pool into their mean, with a Student-t interval over the processes; several
placements of one process's inputs give the fastest placement's median.
"""

from __future__ import annotations

import functools
import math
import statistics

from services.schema import RuntimeStats

Z95 = 1.959964
# Two-sided 95% Student-t quantiles by degrees of freedom; beyond the table the normal quantile (2% narrower at 30).
# fmt: off
_T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
    11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086,
    21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
}
# fmt: on


def median_ci(samples: list[float]) -> tuple[float, float]:
    xs = sorted(samples)
    lo, hi = median_ranks(len(xs))
    return xs[lo - 1], xs[hi - 1]


@functools.cache
def median_ranks(n: int) -> tuple[int, int]:
    """The 1-based ranks (lo, n + 1 - lo) of the order statistics that bound the median of n samples: the largest
    lo with P(Binomial(n, 1/2) < lo) <= 2.5%, so at least 95% coverage (the range under six samples, where it covers
    less). Exact ranks: the normal approximation with its continuity step takes a rank more on each side at most
    sizes under forty (5 and 16 of 20 samples, coverage 98.8%, where 6 and 15 cover 95.9%), so sampling went on
    longer than its target asked."""
    lo, tail = 1, 0.0
    log_all = n * math.log(2.0)
    for k in range(n):
        tail += math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - log_all)
        if tail > 0.025:
            break
        lo = k + 1
    return lo, n + 1 - lo


def ci_rel_halfwidth(samples: list[float], resolution_ms: float = 0.0) -> float:
    if len(samples) < 3:
        return math.inf
    lo, hi = median_ci(samples)
    med = statistics.median(samples)
    return ((hi - lo) / 2 + resolution_ms / 2) / med if med > 0 else math.inf


def stop_target(median_ms: float, target_rel: float, resolution_ms: float, ticks: float) -> float:
    """The relative half-width at which sampling a median stops: `target_rel`, or `ticks` ticks of the timer
    where those are wider. The interval's bounds fall on ticks, so on a median of a few microseconds its
    half-width moves in steps of a tick (0.79% of 4 µs) and a target under one step is met only by chance."""
    return max(target_rel, ticks * resolution_ms / median_ms) if median_ms > 0 else target_rel


def precise_enough(samples: list[float], resolution_ms: float, target_rel: float, ticks: float) -> bool:
    """Whether a median's 95% CI is within the stop target (`stop_target`); the median is looked up only where
    a floor in ticks could widen the target."""
    width = ci_rel_halfwidth(samples, resolution_ms)
    if width <= target_rel:
        return True
    return ticks > 0 and width <= stop_target(statistics.median(samples), target_rel, resolution_ms, ticks)


# The fewest samples whose range bounds their median with 95% confidence: the range of n samples misses the median
# with probability 2 * 2**-n, 3.1% for six (five miss 6.3%). `median_ci` of six samples is their range.
MIN_SAMPLES_FOR_CI = 6


def min_calls(call_ms: float, most: int, min_sampling_ms: float) -> int:
    """Calls a side makes before its median may count as precise: `most`, or as many as last `min_sampling_ms`
    where those are fewer (slow calls: at KernelBench's published sizes a timed call costs tens of milliseconds
    of fresh inputs and checks), never fewer than MIN_SAMPLES_FOR_CI. The precision target still has to be met."""
    if call_ms <= 0:
        return most
    return max(min(most, MIN_SAMPLES_FOR_CI), min(most, math.ceil(min_sampling_ms / call_ms)))


def pool_precise(per_process: list[list[float]], resolution_ms: float, target_rel: float, ticks: float) -> bool:
    """Whether the mean of several processes' medians (`pool`) is within the stop target (`stop_target`): its
    Student-t interval over the processes, which narrows only where the processes' medians agree."""
    runtime = pool(per_process, resolution_ms)
    width = runtime.ci95_rel_halfwidth
    return width is not None and width <= stop_target(runtime.median_ms, target_rel, resolution_ms, ticks)


def low_quantile(samples: list[float], q: float = 0.2) -> float:
    """A low quantile: robust to the one-sided spikes (preemption, page faults) that a loaded machine adds,
    while a constant per-call cost still shifts it fully."""
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[max(0, round(q * 100) - 1)]


def summarize(samples: list[float], resolution_ms: float = 0.0, target: float | None = None) -> RuntimeStats:
    """One process's samples."""
    return pool([samples], resolution_ms, target)


def fastest_placement(
    per_placement: list[list[float]], resolution_ms: float = 0.0, target: float | None = None
) -> RuntimeStats:
    """Samples from several placements of one process's inputs: the fastest placement's median. A placement can
    slow a kernel but not make it faster than its work allows: on a host of four busy H100s, one placement in three
    took 1.2 to 10 times the others' median for either side (fresh allocations of gigabytes beside other processes'
    churn), and a mean over placements moved speedups by up to a factor of four. Its interval is the calls' own
    precision over the placements the time rests on (`bearing_placements`, scaled around the fastest median), the
    one sampling stopped on: calls move on from a placement after their share, so the fastest may hold four calls,
    whose range alone reported half-widths of up to 11 times the median on an H200 with one slow call among them.
    The spread and mean are the fastest placement's; `trials` counts every placement's calls; `process_medians_ms`
    lists every placement's median."""
    if not per_placement or not all(per_placement):
        raise ValueError("no timing samples")
    medians = [statistics.median(xs) for xs in per_placement]
    fastest = min(medians)
    pooled = summarize(scaled_placements(bearing_placements(per_placement), fastest), resolution_ms)
    return summarize(per_placement[medians.index(fastest)], resolution_ms, target).model_copy(
        update={
            "ci95_low_ms": pooled.ci95_low_ms,
            "ci95_high_ms": pooled.ci95_high_ms,
            "ci95_rel_halfwidth": pooled.ci95_rel_halfwidth,
            "trials": sum(len(xs) for xs in per_placement),
            "processes": len(per_placement),
            "process_medians_ms": medians,
        }
    )


# A placement whose median is this much above the side's fastest is a slow one: it does not bear on the side's time.
SLOW_PLACEMENT_REL = 0.05


def slow_placements(per_placement: list[list[float]]) -> list[bool]:
    """Per placement, whether its median is more than SLOW_PLACEMENT_REL above the fastest placement's."""
    medians = [statistics.median(xs) for xs in per_placement]
    return [m > min(medians) * (1 + SLOW_PLACEMENT_REL) for m in medians]


def is_slow_placement(per_placement: list[list[float]], i: int) -> bool:
    """Whether placement `i` is a slow one (`slow_placements`)."""
    return slow_placements(per_placement)[i]


def bearing_placements(per_placement: list[list[float]]) -> list[list[float]]:
    """The placements whose calls bear on a side's time and its precision: all but the slow ones, whose median the
    time (the fastest's) never is, and whose calls spread: counted in, they kept sampling going until calls piled
    into the last placement outweighed them (104 and 114 calls a side on a 4 x H100 host, against a median of 27).
    The last placement stays in while it is slow: further calls land there and are judged as they are."""
    slow = slow_placements(per_placement)
    slow[-1] = False
    return [xs for xs, s in zip(per_placement, slow, strict=True) if not s]


def scaled_placements(per_placement: list[list[float]], center: float) -> list[float]:
    """Every placement's samples scaled so that its median is `center`: the calls' own spread, without the spread
    between placements, which more calls in one placement cannot narrow."""
    found = []
    for xs in per_placement:
        median = statistics.median(xs)
        found += [x * center / median for x in xs] if median > 0 else xs
    return found


def mean_ci_halfwidth(values: list[float]) -> float:
    """The half-width of the 95% Student-t interval of the mean of `values` (two or more)."""
    return _T95.get(len(values) - 1, Z95) * statistics.stdev(values) / math.sqrt(len(values))


def pool(per_process: list[list[float]], resolution_ms: float = 0.0, target: float | None = None) -> RuntimeStats:
    """Samples from one or more processes: the median (one process) or the mean of the processes' medians,
    with its 95% CI; spread, mean and minimum over all samples."""
    samples = [x for xs in per_process for x in xs]
    if not samples or not all(per_process):
        raise ValueError("no timing samples")
    q = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else [samples[0]] * 3
    medians = [statistics.median(xs) for xs in per_process]
    if len(per_process) == 1:
        center = medians[0]
        lo, hi = median_ci(samples)
        lo, hi = lo - resolution_ms / 2, hi + resolution_ms / 2
        rel = ci_rel_halfwidth(samples, resolution_ms) if len(samples) >= 3 else None
    else:
        center = statistics.fmean(medians)
        half = mean_ci_halfwidth(medians) + resolution_ms / 2
        lo, hi = center - half, center + half
        rel = half / center if center > 0 else None
    return RuntimeStats(
        median_ms=center,
        iqr_ms=q[2] - q[0],
        mean_ms=statistics.fmean(samples),
        min_ms=min(samples),
        trials=len(samples),
        ci95_low_ms=lo,
        ci95_high_ms=hi,
        ci95_rel_halfwidth=rel,
        ci95_target_rel=target,
        processes=len(per_process),
        process_medians_ms=medians,
    )
