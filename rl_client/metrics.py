"""Fast@p, KernelBench's `fast_p`: the share of samples that are correct and faster than eager PyTorch by more
than a factor p. An incorrect, rejected or unevaluated sample is a miss, and so is a correct one without a
measured speedup (a CPU service measures none). Fast@0 is the share of correct samples that have a speedup."""

from __future__ import annotations

from collections.abc import Iterable


def is_fast(correct: bool, speedup: float | None, p: float) -> bool:
    """One sample: correct and speedup > p."""
    return bool(correct) and speedup is not None and speedup > p


def fast_p(samples: Iterable[tuple[bool, float | None]], p: float) -> float:
    """The share of (correct, speedup) samples that are fast at p; 0.0 for no samples."""
    flags = [is_fast(correct, speedup, p) for correct, speedup in samples]
    return sum(flags) / len(flags) if flags else 0.0
