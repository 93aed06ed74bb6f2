"""Changed sizes derived from a reference's source: only the sizes get_inputs() alone reads change, powers of two and
multiples of 16 keep those properties, and only problems or policies that opt in are checked on them."""

from __future__ import annotations

import pytest

from services.hidden_shapes import declares_shape_general, describe, half, shape_generality, shape_variants, small

LINEAR = """
import torch
batch: int = 128
in_features = 512
out_features = 256
scale = 2.0
flag = True

def get_inputs():
    return [torch.randn(batch, in_features)]

def get_init_inputs():
    return [in_features, out_features]
"""


def test_sizes_read_only_by_get_inputs_change():
    assert shape_variants(LINEAR) == [{"batch": 64}, {"batch": 16}]


def test_every_size_of_get_inputs_varies_together():
    source = "M = 72\nK = 100\nN = 80\ndef get_inputs():\n    return [rand(M, K), rand(K, N)]\n"
    assert shape_variants(source) == [{"K": 51, "M": 37, "N": 48}, {"K": 3, "M": 3, "N": 16}]
    assert describe(shape_variants(source)[0]) == "M=37, K=51, N=48"  # in the order the source declares them


@pytest.mark.parametrize(
    ("published", "halved", "smallest"),
    [
        (4096, 2048, 16),  # power of two and multiple of 16: both kept
        (64, 32, 16),
        (32, 16, 16),
        (16, 16, 16),  # cannot shrink and stay a multiple of 16
        (8, 4, 2),  # power of two under 16: stays a power of two
        (2, 1, 2),
        (640, 336, 16),  # multiple of 16: an odd multiple of 16
        (48, 16, 16),
        (768, 400, 16),
        (1000, 501, 3),  # neither: odd, and at most 3
        (190, 95, 3),
        (3, 1, 3),
    ],
)
def test_changed_sizes_keep_powers_of_two_and_multiples_of_16(published, halved, smallest):
    assert (half(published), small(published)) == (halved, smallest)
    for changed in (half(published), small(published)):
        if published & (published - 1) == 0:
            assert changed & (changed - 1) == 0
        if published % 16 == 0:
            assert changed % 16 == 0


def test_nothing_to_vary_gives_no_variants():
    assert shape_variants("def get_inputs():\n    return [rand(16, 16)]\n") == []
    assert shape_variants("n = 1\ndef get_inputs():\n    return [rand(n)]\n") == []
    assert shape_variants("n = 16\ndef get_inputs():\n    return [rand(n)]\n") == []
    assert shape_variants("def get_inputs(:\n") == []


def test_a_variant_equal_to_the_published_sizes_is_dropped():
    assert shape_variants("n = 3\ndef get_inputs():\n    return [rand(n)]\n") == [{"n": 1}]


def test_shape_generality_is_opt_in_by_the_problem_or_the_strict_policy():
    assert not declares_shape_general(LINEAR)
    assert shape_generality(LINEAR, "default") is None
    assert "`strict` policy" in shape_generality(LINEAR, "strict")
    opted = LINEAR + "shape_general = True\n"
    assert declares_shape_general(opted) and "shape_general = True" in shape_generality(opted, "default")
    assert not declares_shape_general(LINEAR + "shape_general = 1\n")
    assert not declares_shape_general(LINEAR + "def f():\n    shape_general = True\n")
    assert not declares_shape_general("shape_general = True\ndef get_inputs(:\n")


def test_variants_are_named_as_in_the_feedback():
    assert describe({"rows": 32, "cols": 501}) == "rows=32, cols=501"
