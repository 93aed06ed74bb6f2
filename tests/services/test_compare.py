"""Output comparison in the trusted parent: tolerances, special values, structure checks."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import services.compare as compare_mod
from services.compare import (
    Comparison,
    compare_outputs,
    compare_tensor,
    inputs_equal,
    structure_mismatch,
    tolerance,
)
from services.protocol.tensors import describe

INF = math.inf
NAN = math.nan
ROOT = Path(__file__).resolve().parents[2]


def _desc(obj):
    return describe(obj, [])


def _tol(dtype):
    return tolerance(dtype, 1e-4, 1e-2)


# tolerance()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.int64])
def test_tolerance_of_full_precision_dtypes_is_fp32_tol(dtype):
    assert tolerance(dtype, 1e-4, 1e-2) == (1e-4, 1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tolerance_of_half_dtypes_is_half_tol(dtype):
    assert tolerance(dtype, 1e-4, 1e-2) == (1e-2, 1e-2)


def test_tolerance_overrides_replace_only_the_given_side():
    assert tolerance(torch.float32, 1e-4, 1e-2, atol=0.5) == (0.5, 1e-4)
    assert tolerance(torch.float16, 1e-4, 1e-2, rtol=0.25) == (1e-2, 0.25)
    assert tolerance(torch.bfloat16, 1e-4, 1e-2, atol=0.5, rtol=0.25) == (0.5, 0.25)


# compare_tensor(): floating point


def test_within_tolerance_passes():
    ref = torch.tensor([1.0, -2.0, 0.0, 1000.0], dtype=torch.float64)
    # Bounds: atol + rtol*|ref| = 2e-4, 3e-4, 1e-4, 0.1001.
    cand = ref + torch.tensor([1.9e-4, -2.9e-4, 0.9e-4, 0.1], dtype=torch.float64)
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert c.ok
    assert c.reason == ""
    assert c.mismatched == 0
    assert c.total == 4
    assert c.max_abs_error == pytest.approx(0.1)


def test_just_outside_tolerance_fails_with_exact_mismatch_count():
    ref = torch.zeros(10, dtype=torch.float64)
    cand = ref.clone()
    cand[[1, 4, 9]] = torch.tensor([1.01e-4, -1.01e-4, 2e-4], dtype=torch.float64)
    cand[5] = 0.99e-4  # inside
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert not c.ok
    assert c.mismatched == 3
    assert c.total == 10
    assert c.reason == "3 of 10 values (atol=0.0001, rtol=0.0001) differ (30.00%)"
    assert c.max_abs_error == pytest.approx(2e-4)
    assert c.max_rel_error == 0.0  # no reference element exceeds atol in magnitude


def test_rtol_scales_with_the_reference_magnitude():
    ref = torch.tensor([100.0, 100.0], dtype=torch.float64)
    cand = torch.tensor([100.5, 101.5], dtype=torch.float64)  # bound 0.01 + 0.01*100 = 1.01
    c = compare_tensor(ref, cand, 0.01, 0.01)
    assert c.mismatched == 1
    assert c.max_abs_error == pytest.approx(1.5)
    assert c.max_rel_error == pytest.approx(0.015)


def test_max_errors_skip_tiny_references_for_the_relative_error():
    ref = torch.tensor([2.0, 4.0, 0.0, -8.0], dtype=torch.float64)
    cand = torch.tensor([2.5, 4.0, 0.1, -7.0], dtype=torch.float64)
    c = compare_tensor(ref, cand, 1.0, 1.0)
    assert c.ok
    assert c.max_abs_error == pytest.approx(1.0)
    # |ref| > atol only for 2, 4 and -8: relative errors 0.25, 0, 0.125.
    assert c.max_rel_error == pytest.approx(0.25)


def test_half_precision_is_compared_in_float32():
    ref = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float16)
    cand = torch.tensor([1.0, 2.0, 4.0625], dtype=torch.float16)  # exact fp16 values
    c = compare_tensor(ref, cand, 1e-2, 1e-2)  # bound at 4.0: 0.01 + 0.04 = 0.05 < 0.0625
    assert not c.ok
    assert c.mismatched == 1
    assert c.max_abs_error == 0.0625
    assert c.max_rel_error == pytest.approx(0.0625 / 4)
    assert compare_tensor(ref, cand, 1e-2, 2e-2).ok  # bound 0.01 + 0.08


def test_bfloat16_within_half_tolerance_passes():
    ref = torch.linspace(-3, 3, 101, dtype=torch.float32)
    assert compare_tensor(ref.bfloat16(), (ref * 1.001).bfloat16(), 1e-2, 1e-2).ok


def test_nan_at_the_same_position_passes():
    ref = torch.tensor([1.0, NAN, 3.0])
    cand = torch.tensor([1.0, NAN, 3.0 + 1e-6])
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert c.ok
    assert c.mismatched == 0
    assert math.isfinite(c.max_abs_error)


def test_matching_infinities_pass():
    ref = torch.tensor([INF, -INF, 0.0])
    c = compare_tensor(ref, ref.clone(), 1e-4, 1e-4)
    assert c.ok
    assert c.max_abs_error == 0.0


def test_nan_against_a_number_fails_and_mentions_nan():
    ref = torch.tensor([1.0, NAN, 3.0, 4.0])
    cand = torch.tensor([1.0, 2.0, 3.0, NAN])
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert not c.ok
    assert c.mismatched == 2
    assert "NaN/Inf" in c.reason
    assert c.reason == (
        "2 of 4 values (atol=0.0001, rtol=0.0001) differ (50.00%); 2 NaN/Inf positions do not match the reference"
    )


def test_number_where_reference_has_inf_fails():
    c = compare_tensor(torch.tensor([INF, 1.0]), torch.tensor([1e30, 1.0]), 1e-4, 1e-4)
    assert not c.ok
    assert c.mismatched == 1
    assert "1 NaN/Inf positions" in c.reason


def test_plus_inf_against_minus_inf_fails():
    c = compare_tensor(torch.tensor([INF]), torch.tensor([-INF]), 1.0, 1.0)
    assert not c.ok
    assert c.mismatched == 1
    assert "NaN/Inf" in c.reason


def test_nan_against_inf_fails():
    c = compare_tensor(torch.tensor([NAN, 0.0]), torch.tensor([INF, 0.0]), 1.0, 1.0)
    assert not c.ok
    assert c.mismatched == 1


def test_ordinary_mismatch_does_not_mention_nan():
    c = compare_tensor(torch.tensor([1.0]), torch.tensor([2.0]), 1e-4, 1e-4)
    assert not c.ok
    assert "NaN" not in c.reason


# compare_tensor(): exact dtypes


def test_integer_tensors_compare_exactly_whatever_the_tolerance():
    ref = torch.tensor([1, 2, 3, 1_000_000], dtype=torch.int64)
    cand = torch.tensor([1, 2, 4, 1_000_001], dtype=torch.int64)
    c = compare_tensor(ref, cand, 1.0, 1.0)
    assert not c.ok
    assert c.mismatched == 2
    assert c.reason == "2 of 4 values differ (50.00%)"
    assert compare_tensor(ref, ref.clone(), 1e-4, 1e-4).ok


def test_bool_tensors_compare_exactly():
    ref = torch.tensor([True, False, True])
    c = compare_tensor(ref, torch.tensor([True, True, True]), 1e-4, 1e-4)
    assert not c.ok
    assert c.mismatched == 1
    assert c.reason == "1 of 3 values differ (33.33%)"
    assert compare_tensor(ref, ref.clone(), 1e-4, 1e-4).ok


# compare_tensor(): complex


def test_complex_within_tolerance_passes():
    ref = torch.tensor([1 + 1j, 2 - 2j], dtype=torch.complex64)
    c = compare_tensor(ref, ref + 1e-5, 1e-4, 1e-4)
    assert c.ok
    assert c.total == 4  # real and imaginary parts are counted separately


def test_complex_mismatch_in_one_component_is_counted():
    ref = torch.tensor([1 + 1j, 2 + 2j, 3 + 3j], dtype=torch.complex128)
    cand = torch.tensor([1 + 1j, 2 + 3j, 3 + 3j], dtype=torch.complex128)
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert not c.ok
    assert c.mismatched == 1
    assert c.total == 6
    assert c.max_abs_error == pytest.approx(1.0)


def test_complex_mismatch_count_never_exceeds_total():
    ref = torch.tensor([1 + 1j], dtype=torch.complex64)
    cand = torch.tensor([2 + 2j], dtype=torch.complex64)
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert not c.ok
    assert c.mismatched <= c.total


# compare_tensor(): chunking


def test_chunked_comparison_keeps_counts_and_maxima_exact(monkeypatch):
    monkeypatch.setattr(compare_mod, "CHUNK", 7)
    ref = torch.arange(50, dtype=torch.float64)
    cand = ref.clone()
    # Mismatches at chunk edges (0, 6 | 7, 13 | 14) and in the last, partial chunk (49).
    for i in (0, 6, 7, 13, 14, 49):
        cand[i] += 0.5
    cand[20] = NAN  # NaN/Inf mismatch in a middle chunk
    cand[30] += 3.0  # the largest finite error, alone in its chunk
    c = compare_tensor(ref, cand, 0.1, 0.0)
    assert c.total == 50
    assert c.mismatched == 8
    assert c.reason.startswith("8 of 50 values")
    assert "1 NaN/Inf positions" in c.reason
    assert c.max_abs_error == pytest.approx(3.0)
    assert c.max_rel_error == pytest.approx(3.0 / 30)
    monkeypatch.setattr(compare_mod, "CHUNK", 1 << 25)
    unchunked = compare_tensor(ref, cand, 0.1, 0.0)
    assert (unchunked.mismatched, unchunked.reason, unchunked.max_abs_error, unchunked.max_rel_error) == (
        c.mismatched,
        c.reason,
        c.max_abs_error,
        c.max_rel_error,
    )


def test_outputs_equal_value_for_value_take_one_pass_and_report_no_error(monkeypatch):
    # At KernelBench's sizes the full comparison makes ~20 passes over gigabytes; a repeat of a deterministic kernel,
    # or a copy of the reference's output, needs one.
    monkeypatch.setattr(compare_mod, "CHUNK", 7)
    ref = torch.linspace(-3, 3, 50, dtype=torch.float32)
    ref[5], ref[10] = 0.0, float("inf")
    cand = ref.clone()
    cand[5] = -0.0  # equal in value

    def full_comparison(*_: object) -> None:
        raise AssertionError("the full comparison ran on equal outputs")

    with monkeypatch.context() as patched:
        patched.setattr(torch, "isfinite", full_comparison)
        c = compare_tensor(ref, cand, 1e-6, 1e-6)
    assert c.ok and (c.mismatched, c.max_abs_error, c.max_rel_error) == (0, 0.0, 0.0)
    cand[49] += 1.0  # unequal in the last chunk only: the full comparison counts it
    c = compare_tensor(ref, cand, 1e-6, 1e-6)
    assert (c.mismatched, c.max_abs_error) == (1, pytest.approx(1.0))


def test_chunked_integer_comparison_counts_exactly(monkeypatch):
    monkeypatch.setattr(compare_mod, "CHUNK", 7)
    ref = torch.arange(30, dtype=torch.int32).reshape(5, 6)
    cand = ref.clone()
    cand[0, 0] = -1
    cand[1, 0] = -1  # flat index 6
    cand[4, 5] = -1  # flat index 29, last partial chunk
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert c.mismatched == 3
    assert c.total == 30


def test_multidimensional_and_non_contiguous_tensors_are_compared_elementwise():
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    cand = ref.clone().t().contiguous().t()  # same values, different strides
    assert compare_tensor(ref, cand, 1e-6, 1e-6).ok
    cand = cand.clone()
    cand[2, 3] = 100.0
    c = compare_tensor(ref, cand, 1e-6, 1e-6)
    assert c.mismatched == 1
    assert c.total == 12


def test_empty_tensors_compare_equal():
    c = compare_tensor(torch.empty(0, 3), torch.empty(0, 3), 1e-4, 1e-4)
    assert c.ok
    assert (c.total, c.mismatched, c.max_abs_error) == (0, 0, 0.0)


# structure_mismatch()


def test_same_structure_has_no_mismatch():
    ref = (torch.zeros(2, 3), [torch.zeros(4, dtype=torch.int64), 1.5], None)
    cand = (torch.ones(2, 3), [torch.ones(4, dtype=torch.int64), 1.5], None)
    assert structure_mismatch(_desc(ref), _desc(cand)) is None


def test_dtype_mismatch():
    msg = structure_mismatch(_desc(torch.zeros(2)), _desc(torch.zeros(2, dtype=torch.float16)))
    assert msg == "output dtype should be float32, got float16"


def test_shape_mismatch():
    msg = structure_mismatch(_desc(torch.zeros(2, 3)), _desc(torch.zeros(3, 2)))
    assert msg == "output shape should be (2, 3), got (3, 2)"


def test_tuple_length_mismatch():
    msg = structure_mismatch(_desc((torch.zeros(1), torch.zeros(1))), _desc((torch.zeros(1),)))
    assert msg == "output should have 2 items, got 1"


def test_nested_mismatch_names_the_item():
    ref = (torch.zeros(1), [torch.zeros(2), torch.zeros(3)])
    cand = (torch.zeros(1), [torch.zeros(2), torch.zeros(3, dtype=torch.float64)])
    assert structure_mismatch(_desc(ref), _desc(cand)) == "output[1][1] dtype should be float32, got float64"


def test_tensor_against_tuple_mismatch():
    msg = structure_mismatch(_desc(torch.zeros(2)), _desc((torch.zeros(2),)))
    assert msg == "output should be a tensor, got a tuple"


def test_tuple_against_list_mismatch():
    msg = structure_mismatch(_desc((torch.zeros(2),)), _desc([torch.zeros(2)]))
    assert msg == "output should be a tuple, got a list"


def test_tensor_against_scalar_mismatch():
    assert structure_mismatch(_desc(torch.zeros(())), _desc(0.0)) == "output should be a tensor, got a scalar"


class Sub(torch.Tensor):
    pass


def test_tensor_subclass_is_refused():
    cand = _desc(torch.ones(3).as_subclass(Sub))
    msg = structure_mismatch(_desc(torch.ones(3)), cand)
    assert msg == "output is a Sub, not exactly torch.Tensor (subclasses are not accepted)"
    assert "not exactly torch.Tensor" in msg


def test_tensor_subclass_nested_in_a_tuple_is_refused():
    ref = _desc((torch.ones(3), torch.ones(3)))
    cand = _desc((torch.ones(3), torch.ones(3).as_subclass(Sub)))
    assert structure_mismatch(ref, cand).startswith("output[1] is a Sub, not exactly torch.Tensor")


def test_unsupported_type_is_refused():
    assert structure_mismatch(_desc(torch.ones(1)), _desc({"a": 1})) == "output has unsupported type dict"
    # Even when the reference returns the same unsupported type.
    assert structure_mismatch(_desc(object()), _desc(object())) == "output has unsupported type object"


def test_custom_where_prefix():
    assert structure_mismatch(_desc(torch.ones(1)), _desc(1), "inputs") == "inputs should be a tensor, got a scalar"


@pytest.mark.parametrize(
    ("ref", "cand"),
    [
        (1.0, 1.0),
        (1.0, 1.0 + 1e-9),
        (0.0, 1e-7),
        (3, 3),
        (True, True),
        (None, None),
        (NAN, NAN),
    ],
)
def test_equal_or_close_scalars_match(ref, cand):
    assert structure_mismatch(_desc(ref), _desc(cand)) is None


@pytest.mark.parametrize(
    ("ref", "cand", "msg"),
    [
        (1.0, 1.1, "output should be 1.0, got 1.1"),
        (2, 3, "output should be 2, got 3"),
        (None, 0, "output should be a NoneType (None), got 0"),
        (1.0, 1, "output should be a float (1.0), got 1"),
        (1.0, NAN, "output should be 1.0, got nan"),
        (NAN, 1.0, "output should be nan, got 1.0"),
        (True, False, "output should be True, got False"),
    ],
)
def test_different_scalars_mismatch(ref, cand, msg):
    assert structure_mismatch(_desc(ref), _desc(cand)) == msg


# compare_outputs() and inputs_equal()


def test_compare_outputs_of_one_tensor_has_no_prefix():
    c = compare_outputs([torch.zeros(4)], [torch.tensor([0.0, 0.0, 0.0, 1.0])], _tol)
    assert not c.ok
    assert c.reason == "1 of 4 values (atol=0.0001, rtol=0.0001) differ (25.00%)"


def test_compare_outputs_prefixes_the_failing_tensor_index():
    ref = [torch.zeros(4), torch.zeros(2, dtype=torch.float16)]
    cand = [torch.zeros(4), torch.tensor([0.0, 0.5], dtype=torch.float16)]
    c = compare_outputs(ref, cand, _tol)
    assert not c.ok
    assert c.reason == "output tensor 1: 1 of 2 values (atol=0.01, rtol=0.01) differ (50.00%)"
    assert c.total == 6
    assert c.mismatched == 1
    assert c.max_abs_error == 0.5


def test_compare_outputs_keeps_the_first_failure_and_sums_counts():
    ref = [torch.zeros(3), torch.zeros(5, dtype=torch.int64)]
    cand = [torch.tensor([0.0, 2.0, 0.0]), torch.tensor([0, 1, 1, 0, 0])]
    c = compare_outputs(ref, cand, _tol)
    assert c.reason.startswith("output tensor 0: 1 of 3 values")
    assert c.mismatched == 3
    assert c.total == 8
    assert c.max_abs_error == 2.0


def test_compare_outputs_of_no_tensors_passes():
    c = compare_outputs([], [], _tol)
    assert c.ok
    assert c.total == 0


def test_compare_outputs_uses_the_per_dtype_tolerance():
    ref = [torch.ones(2, dtype=torch.float16), torch.ones(2)]
    cand = [torch.tensor([1.0, 1.005], dtype=torch.float16), torch.tensor([1.0, 1.00005])]
    assert compare_outputs(ref, cand, _tol).ok
    cand[1] = torch.tensor([1.0, 1.005])
    assert compare_outputs(ref, cand, _tol).reason.startswith("output tensor 1:")


def test_comparison_absorb_keeps_first_reason_and_maxima():
    a = Comparison(ok=False, reason="first", max_abs_error=1.0, max_rel_error=0.1, mismatched=2, total=10)
    total = Comparison()
    total.absorb(Comparison(max_abs_error=3.0, total=5))
    total.absorb(a)
    total.absorb(Comparison(ok=False, reason="second", max_rel_error=0.5, mismatched=1, total=1))
    assert (total.ok, total.reason) == (False, "first")
    assert (total.max_abs_error, total.max_rel_error, total.mismatched, total.total) == (3.0, 0.5, 3, 16)


def test_inputs_equal_when_unchanged():
    before = [torch.arange(6.0).reshape(2, 3), torch.tensor([1, 2])]
    after = [t.clone() for t in before]
    assert inputs_equal(before, after)


def test_inputs_equal_detects_a_single_changed_element():
    before = [torch.arange(6.0), torch.tensor([1, 2])]
    after = [before[0].clone(), before[1].clone()]
    after[0][5] = 5.0000005
    assert not inputs_equal(before, after)


def test_inputs_equal_detects_changed_shape():
    assert not inputs_equal([torch.zeros(4)], [torch.zeros(2, 2)])


def test_inputs_equal_with_unchanged_nan_inputs():
    before = [torch.tensor([1.0, NAN])]
    assert inputs_equal(before, [before[0].clone()])


# compare_tensor(): counts and maxima kept on the device


def _one_pass_oracle(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float) -> tuple[int, int, float, float]:
    """The comparison written plainly over the whole tensor, with boolean indexing and the special values spelled
    out one by one: what the chunked, synchronisation-free form must compute."""
    r, c = ref.double(), cand.double()
    if ref.dtype != torch.float64:  # half types and fp32 compare in fp32
        r, c = ref.float(), cand.float()
    finite = torch.isfinite(r) & torch.isfinite(c)
    special = (
        (torch.isnan(r) != torch.isnan(c))
        | ((r == math.inf) != (c == math.inf))
        | ((r == -math.inf) != (c == -math.inf))
    )
    diff = (c - r).abs()[finite]
    bound = (atol + rtol * r.abs())[finite]
    big = r.abs()[finite] > atol
    rel = diff[big] / r.abs()[finite][big]
    return (
        int((diff > bound).sum()),
        int(special.sum()),
        float(diff.max()) if diff.numel() else 0.0,
        float(rel.max()) if rel.numel() else 0.0,
    )


def counts_agree_with_the_oracle(device: str, n: int = 10_007) -> None:
    """For each floating dtype, tensors holding everything a comparison counts (errors inside and beyond the
    tolerance, NaN and ±Inf at the same and at different places, zeros where the relative error is not taken, a
    difference that overflows), over several chunks and a length that is not a whole number of them."""
    g = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        ref = torch.randn(n, generator=g, dtype=torch.float64)
        cand = ref + torch.randn(n, generator=g, dtype=torch.float64) * torch.where(
            torch.rand(n, generator=g) < 0.05, 1e-1, 1e-6
        )
        ref[:20] = 0.0
        for i, (r, c) in enumerate([(NAN, NAN), (NAN, 1.0), (2.0, NAN), (INF, INF), (INF, -INF), (-INF, 3.0)]):
            ref[100 + i], cand[100 + i] = r, c
        big = torch.finfo(dtype).max * 0.75
        ref[200], cand[200] = big, -big  # the difference overflows, except fp16's (compared in fp32)
        ref, cand = ref.to(dtype).to(device), cand.to(dtype).to(device)
        for atol, rtol in ((1e-4, 1e-4), (1e-2, 1e-2), (0.5, 0.0)):
            got = compare_mod._float_comparison(ref, cand, atol, rtol)
            assert got == _one_pass_oracle(ref, cand, atol, rtol), (dtype, atol, rtol, got)
            assert got[0] > 0 and got[1] == 4
            assert (got[2] == math.inf) == (dtype != torch.float16)


def test_the_chunked_comparison_counts_what_a_plain_one_counts(monkeypatch):
    monkeypatch.setattr(compare_mod, "CHUNK", 1000)
    counts_agree_with_the_oracle("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_chunked_comparison_counts_what_a_plain_one_counts_on_a_gpu(monkeypatch):
    monkeypatch.setattr(compare_mod, "CHUNK", 1 << 20)
    counts_agree_with_the_oracle("cuda", n=3 * 2**20 + 5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_gpu_comparison_of_tensors_that_differ_fails_with_the_counts():
    ref = torch.zeros(5000, device="cuda")
    cand = ref.clone()
    cand[:3] = 1.0
    cand[10] = NAN
    c = compare_tensor(ref, cand, 1e-4, 1e-4)
    assert not c.ok and c.mismatched == 4 and c.max_abs_error == 1.0
    assert "NaN/Inf positions" in c.reason


def test_the_parent_defines_no_triton_kernel():
    # The parent loads what it compiles from Triton's on-disk cache, which the children's user can write: a kernel
    # of the parent's would be code a candidate could replace. Kernels live in the children (and the bundled ones).
    import ast

    parent = [p for p in (ROOT / "services").rglob("*.py") if not {"child", "bundled"} & set(p.parts)]
    jitted = [
        f"{p.relative_to(ROOT)}:{node.lineno}"
        for p in parent
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert jitted == []
