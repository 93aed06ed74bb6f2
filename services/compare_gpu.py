"""`services.compare.compare_tensor` for floating-point tensors on a GPU, in one pass.

The chunked torch form makes about twenty passes over every element (the finiteness and NaN/Inf tests, the
difference, the bound, the masks) and synchronises with the host several times a chunk: at KernelBench's 6.4 GB
outputs one comparison took ~0.1 s, and a passed evaluation makes half a dozen of them. This kernel reads each pair
once and writes per-block partial results, which the host reduces after one synchronisation. It computes what the
torch form computes, in the same dtype (half types in fp32, the tolerances in the compute dtype), so the two agree
on every count and maximum (tests/services/test_compare.py runs both on the same tensors).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def _compare_blocks(
    ref_ptr,
    cand_ptr,
    tol_ptr,
    n,
    mismatched_ptr,
    special_ptr,
    abs_ptr,
    rel_ptr,
    DOUBLE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    r = tl.load(ref_ptr + offs, mask=inside, other=0)
    c = tl.load(cand_ptr + offs, mask=inside, other=0)
    if DOUBLE:
        r, c = r.to(tl.float64), c.to(tl.float64)
    else:
        r, c = r.to(tl.float32), c.to(tl.float32)
    atol = tl.load(tol_ptr)
    rtol = tl.load(tol_ptr + 1)
    # x - x is 0 for a finite x and NaN for NaN and ±Inf: finiteness without constants or libdevice.
    r_nan, c_nan = r != r, c != c
    r_finite, c_finite = (r - r) == 0, (c - c) == 0
    r_pinf = (r_finite == 0) & (r_nan == 0) & (r > 0)
    c_pinf = (c_finite == 0) & (c_nan == 0) & (c > 0)
    r_ninf = (r_finite == 0) & (r_nan == 0) & (r < 0)
    c_ninf = (c_finite == 0) & (c_nan == 0) & (c < 0)
    special = ((r_nan != c_nan) | (r_pinf != c_pinf) | (r_ninf != c_ninf)) & inside
    finite = r_finite & c_finite & inside
    r_abs = tl.abs(r)
    diff = tl.where(finite, tl.abs(c - r), 0.0)
    bad = finite & (diff > atol + rtol * r_abs)
    big = finite & (r_abs > atol)
    rel = tl.where(big, diff / tl.where(big, r_abs, 1.0), 0.0)
    tl.store(mismatched_ptr + pid, tl.sum(bad.to(tl.int32), axis=0))
    tl.store(special_ptr + pid, tl.sum(special.to(tl.int32), axis=0))
    tl.store(abs_ptr + pid, tl.max(diff, axis=0))
    tl.store(rel_ptr + pid, tl.max(rel, axis=0))


def fused_comparison(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float) -> tuple[int, int, float, float]:
    """(elements beyond the tolerance among finite pairs, NaN/±Inf positions that differ, the largest absolute
    error and the largest relative error where |ref| > atol) of two real floating-point tensors of one dtype and
    shape, the maxima 0.0 where no element counts."""
    compute = torch.float64 if ref.dtype == torch.float64 else torch.float32
    r, c = ref.reshape(-1), cand.reshape(-1)
    n = r.numel()
    if n == 0:
        return 0, 0, 0.0, 0.0
    blocks = triton.cdiv(n, BLOCK)
    counts = torch.empty((2, blocks), dtype=torch.int32, device=r.device)
    maxima = torch.empty((2, blocks), dtype=compute, device=r.device)
    tol = torch.tensor([atol, rtol], dtype=compute, device=r.device)
    _compare_blocks[(blocks,)](
        r, c, tol, n, counts[0], counts[1], maxima[0], maxima[1], DOUBLE=compute == torch.float64, BLOCK=BLOCK
    )
    mismatched, special = counts.sum(dim=1, dtype=torch.int64).tolist()
    max_abs, max_rel = maxima.amax(dim=1).tolist()
    return int(mismatched), int(special), float(max_abs), float(max_rel)
