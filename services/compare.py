"""Output comparison, done only in the trusted parent on tensors it owns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

CHUNK = 1 << 25
HALF_DTYPES = (torch.float16, torch.bfloat16)


@dataclass
class Comparison:
    ok: bool = True
    reason: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    mismatched: int = 0
    total: int = 0
    details: list[str] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        if self.ok:
            self.reason = reason
        self.ok = False

    def absorb(self, other: Comparison) -> None:
        if not other.ok:
            self.fail(other.reason)
        self.max_abs_error = max(self.max_abs_error, other.max_abs_error)
        self.max_rel_error = max(self.max_rel_error, other.max_rel_error)
        self.mismatched += other.mismatched
        self.total += other.total


def tolerance(
    dtype: torch.dtype, fp32_tol: float, half_tol: float, atol: float | None = None, rtol: float | None = None
) -> tuple[float, float]:
    default = half_tol if dtype in HALF_DTYPES else fp32_tol
    return (default if atol is None else atol, default if rtol is None else rtol)


def structure_mismatch(ref: dict[str, Any], cand: dict[str, Any], where: str = "output") -> str | None:
    """Why two output descriptions differ in kind, type, length, dtype or shape (None if they don't)."""
    if cand["t"] == "tensor_subclass":
        return f"{where} is a {cand['type']}, not exactly torch.Tensor (subclasses are not accepted)"
    if cand["t"] == "unsupported":
        return f"{where} has unsupported type {cand['type']}"
    if ref["t"] != cand["t"]:
        return f"{where} should be a {ref['t']}, got a {cand['t']}"
    if ref["t"] in ("tuple", "list"):
        if len(ref["items"]) != len(cand["items"]):
            return f"{where} should have {len(ref['items'])} items, got {len(cand['items'])}"
        for i, (r, c) in enumerate(zip(ref["items"], cand["items"], strict=True)):
            if msg := structure_mismatch(r, c, f"{where}[{i}]"):
                return msg
        return None
    if ref["t"] == "tensor":
        if ref["dtype"] != cand["dtype"]:
            return f"{where} dtype should be {ref['dtype']}, got {cand['dtype']}"
        if ref["shape"] != cand["shape"]:
            return f"{where} shape should be {tuple(ref['shape'])}, got {tuple(cand['shape'])}"
        return None
    if ref["t"] == "scalar":
        r, c = ref["value"], cand["value"]
        if type(r) is not type(c):
            return f"{where} should be a {type(r).__name__} ({r!r}), got {c!r}"
        if isinstance(r, float) and (
            math.isclose(r, c, rel_tol=1e-6, abs_tol=1e-6) or (math.isnan(r) and math.isnan(c))
        ):
            return None
        if r != c:
            return f"{where} should be {r!r}, got {c!r}"
    return None


def compare_tensor(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float) -> Comparison:
    """Elementwise |cand - ref| <= atol + rtol*|ref| with identical NaN/±Inf positions, chunked so
    multi-GB outputs need little extra memory."""
    if ref.dtype.is_complex:  # real and imaginary parts are compared (and counted) separately
        ref, cand = torch.view_as_real(ref), torch.view_as_real(cand)
    result = Comparison(total=ref.numel())
    r_flat, c_flat = ref.reshape(-1), cand.reshape(-1)
    exact = not ref.dtype.is_floating_point
    if exact:
        nonfinite_mismatch = 0
        bad = sum(int((r_flat[i : i + CHUNK] != c_flat[i : i + CHUNK]).sum()) for i in range(0, ref.numel(), CHUNK))
    else:
        bad, nonfinite_mismatch, result.max_abs_error, result.max_rel_error = _float_comparison(
            r_flat, c_flat, atol, rtol
        )
    result.mismatched = bad + nonfinite_mismatch
    if result.mismatched:
        share = result.mismatched / max(result.total, 1)
        what = "values" if exact else f"values (atol={atol:g}, rtol={rtol:g})"
        msg = f"{result.mismatched} of {result.total} {what} differ ({share:.2%})"
        if nonfinite_mismatch:
            msg += f"; {nonfinite_mismatch} NaN/Inf positions do not match the reference"
        result.fail(msg)
    return result


def _float_comparison(
    r_flat: torch.Tensor, c_flat: torch.Tensor, atol: float, rtol: float
) -> tuple[int, int, float, float]:
    """(elements beyond the tolerance among finite pairs, NaN/±Inf positions that differ, the largest absolute error,
    the largest relative error where |ref| > atol), half types in fp32. The counts and maxima stay on the device
    until the last chunk: one synchronisation with the host per comparison, not several per chunk, and no boolean
    indexing. Torch operations only: the parent runs no kernel of its own (no Triton: its on-disk cache is writable
    by the children's user, docs/security.md)."""
    # Equal outputs (a deterministic kernel's repeat, the copies of the reference's output lazy samples return, an
    # exact elementwise kernel) end after one pass over each, chunk by chunk; unequal ones stop at their first
    # unequal chunk, usually the first. NaN is never equal to itself: a NaN takes the full comparison.
    if all(torch.equal(r_flat[i : i + CHUNK], c_flat[i : i + CHUNK]) for i in range(0, r_flat.numel(), CHUNK)):
        return 0, 0, 0.0, 0.0
    zero = torch.zeros(
        (), dtype=torch.float64 if r_flat.dtype == torch.float64 else torch.float32, device=r_flat.device
    )
    counts = torch.zeros(2, dtype=torch.int64, device=r_flat.device)
    maxima = torch.stack([zero, zero])
    for start in range(0, r_flat.numel(), CHUNK):
        r = r_flat[start : start + CHUNK]
        c = c_flat[start : start + CHUNK]
        r, c = r.float() if r.dtype in HALF_DTYPES else r, c.float() if c.dtype in HALF_DTYPES else c
        finite = torch.isfinite(r) & torch.isfinite(c)
        # A pair not both finite matches only as the same infinity or two NaNs.
        special = ~(finite | (r == c) | (torch.isnan(r) & torch.isnan(c)))
        r_abs = r.abs()
        diff = torch.where(finite, (c - r).abs(), zero)
        bad = finite & (diff > atol + rtol * r_abs)
        rel = torch.where(finite & (r_abs > atol), diff / r_abs, zero)
        counts += torch.stack([bad.sum(), special.sum()])
        maxima = torch.maximum(maxima, torch.stack([diff.max(), rel.max()]))
    (bad_total, special_total), (max_abs, max_rel) = counts.tolist(), maxima.tolist()
    return bad_total, special_total, max_abs, max_rel


def compare_outputs(ref: list[torch.Tensor], cand: list[torch.Tensor], tol: Any) -> Comparison:
    """`tol(dtype) -> (atol, rtol)`; tensors are paired in description order."""
    total = Comparison()
    for i, (r, c) in enumerate(zip(ref, cand, strict=True)):
        atol, rtol = tol(r.dtype)
        one = compare_tensor(r, c, atol, rtol)
        if not one.ok and len(ref) > 1:
            one.reason = f"output tensor {i}: {one.reason}"
        total.absorb(one)
    return total


def inputs_equal(before: list[torch.Tensor], after: list[torch.Tensor]) -> bool:
    """Bit-identical (so an unchanged NaN counts as unchanged)."""
    return len(before) == len(after) and all(
        a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a), _bits(b))
        for a, b in zip(before, after, strict=True)
    )


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)
