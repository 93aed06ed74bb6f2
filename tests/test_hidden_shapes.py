"""Hidden size variants derived from a reference's source: only the sizes get_inputs() alone reads change."""

from __future__ import annotations

from services.hidden_shapes import shape_variants

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


def test_sizes_read_only_by_get_inputs_shrink_to_odd_halves_and_tiny_values():
    assert shape_variants(LINEAR) == [{"batch": 65}, {"batch": 3}]


def test_every_size_of_get_inputs_varies_together():
    source = "M = 64\nK = 32\nN = 16\ndef get_inputs():\n    return [rand(M, K), rand(K, N)]\n"
    assert shape_variants(source) == [{"K": 17, "M": 33, "N": 9}, {"K": 3, "M": 3, "N": 3}]


def test_nothing_to_vary_gives_no_variants():
    assert shape_variants("def get_inputs():\n    return [rand(16, 16)]\n") == []
    assert shape_variants("n = 1\ndef get_inputs():\n    return [rand(n)]\n") == []
    assert shape_variants("def get_inputs(:\n") == []


def test_a_variant_equal_to_the_published_sizes_is_dropped():
    assert shape_variants("n = 3\ndef get_inputs():\n    return [rand(n)]\n") == [{"n": 1}]
