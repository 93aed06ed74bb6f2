"""Datasheet peaks per GPU, for the roofline floor: no honest kernel moves bytes faster than the
memory system or does FLOPs faster than the fastest tensor-core mode, so a time below both floors is
physically impossible. The peaks are deliberately the most generous (dense FP8 for compute)."""

from __future__ import annotations

# (name fragment, HBM bytes/s, dense FLOP/s at the fastest precision); the first match wins.
_PEAKS: tuple[tuple[str, float, float], ...] = (
    ("B200", 8.0e12, 4.5e15),
    ("H200", 4.8e12, 1.979e15),
    ("H100 PCIe", 2.0e12, 1.513e15),
    ("H100", 3.35e12, 1.979e15),
    ("A100", 2.039e12, 0.624e15),
    ("L40S", 0.864e12, 0.733e15),
)


def peaks(gpu_name: str | None) -> tuple[float, float] | None:
    for fragment, bandwidth, flops in _PEAKS:
        if gpu_name and fragment in gpu_name:
            return bandwidth, flops
    return None


def roofline_floor_ms(gpu_name: str | None, min_bytes: float, flops: float) -> float | None:
    """The least time any kernel could take, or None for a GPU without known peaks."""
    known = peaks(gpu_name)
    if known is None:
        return None
    bandwidth, compute = known
    return max(min_bytes / bandwidth, flops / compute) * 1e3
