"""Describing outputs as JSON and moving tensors as raw bytes (no pickle)."""

from __future__ import annotations

import json

import pytest
import torch

from services.protocol import tensors
from services.protocol.tensors import (
    check_alloc,
    describe,
    dtype_from_name,
    fingerprint,
    from_bytes,
    tensor_specs,
    to_bytes,
)


class Sub(torch.Tensor):
    pass


# describe()


def test_describe_tensor_records_dtype_shape_and_the_tensor_itself():
    t = torch.zeros(2, 3, dtype=torch.float16)
    found: list[torch.Tensor] = []
    assert describe(t, found) == {"t": "tensor", "dtype": "float16", "shape": [2, 3]}
    assert len(found) == 1
    assert found[0] is t


def test_describe_zero_dim_tensor_has_empty_shape():
    found: list[torch.Tensor] = []
    assert describe(torch.tensor(1.5), found) == {"t": "tensor", "dtype": "float32", "shape": []}


def test_describe_nested_tuple_and_list_in_order():
    a, b, c = torch.zeros(1), torch.zeros(2, dtype=torch.int64), torch.zeros(3, dtype=torch.bool)
    found: list[torch.Tensor] = []
    desc = describe((a, [b, 3, (c,)], None), found)
    assert desc == {
        "t": "tuple",
        "items": [
            {"t": "tensor", "dtype": "float32", "shape": [1]},
            {
                "t": "list",
                "items": [
                    {"t": "tensor", "dtype": "int64", "shape": [2]},
                    {"t": "scalar", "value": 3},
                    {"t": "tuple", "items": [{"t": "tensor", "dtype": "bool", "shape": [3]}]},
                ],
            },
            {"t": "scalar", "value": None},
        ],
    }
    assert [id(t) for t in found] == [id(a), id(b), id(c)]
    json.dumps(desc)  # the description is plain JSON


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), (0, 0), (-7, -7), (2.5, 2.5), (None, None)],
)
def test_describe_scalars(value, expected):
    found: list[torch.Tensor] = []
    desc = describe(value, found)
    assert desc == {"t": "scalar", "value": expected}
    assert type(desc["value"]) is type(expected)
    assert found == []


def test_describe_nan_scalar_survives_the_json_channel():
    import json
    import math

    desc = describe(float("nan"), [])
    assert math.isnan(json.loads(json.dumps(desc))["value"])


def test_describe_infinite_float_keeps_its_value():
    assert describe(float("-inf"), []) == {"t": "scalar", "value": float("-inf")}


def test_describe_tensor_subclass_is_flagged_and_not_collected():
    found: list[torch.Tensor] = []
    desc = describe(torch.ones(3).as_subclass(Sub), found)
    assert desc == {"t": "tensor_subclass", "type": "Sub"}
    assert found == []


def test_describe_parameter_is_a_tensor_subclass():
    desc = describe(torch.nn.Parameter(torch.ones(2)), [])
    assert desc == {"t": "tensor_subclass", "type": "Parameter"}


@pytest.mark.parametrize(
    ("obj", "type_name"),
    [(object(), "object"), ({"out": 1}, "dict"), ("text", "str"), (b"x", "bytes"), (1j, "complex")],
)
def test_describe_unsupported_objects(obj, type_name):
    assert describe(obj, []) == {"t": "unsupported", "type": type_name}


def test_describe_subclasses_of_tuple_and_scalars_are_unsupported():
    class MyTuple(tuple):
        pass

    class MyInt(int):
        pass

    assert describe(MyTuple((torch.ones(1),)), []) == {"t": "unsupported", "type": "MyTuple"}
    assert describe(MyInt(3), []) == {"t": "unsupported", "type": "MyInt"}


# tensor_specs()


def test_tensor_specs_follow_describe_order():
    out = ([torch.zeros(2, 3), 1.0], torch.zeros(4, dtype=torch.int64), (torch.zeros((), dtype=torch.bfloat16),))
    found: list[torch.Tensor] = []
    specs = tensor_specs(describe(out, found))
    assert specs == [(torch.float32, [2, 3]), (torch.int64, [4]), (torch.bfloat16, [])]
    assert [(t.dtype, list(t.shape)) for t in found] == specs


def test_tensor_specs_of_non_tensors_are_empty():
    assert tensor_specs(describe(3.0, [])) == []
    assert tensor_specs(describe((None, [1, 2]), [])) == []
    assert tensor_specs(describe(object(), [])) == []


def test_tensor_specs_rejects_unknown_dtype_names():
    with pytest.raises(ValueError, match="unsupported dtype 'float8'"):
        tensor_specs({"t": "tensor", "dtype": "float8", "shape": [1]})


# to_bytes() / from_bytes()


@pytest.mark.parametrize(
    "t",
    [
        torch.tensor([[1.5, -2.25, 3.0e-38], [float("inf"), float("-inf"), 0.0]], dtype=torch.float32),
        torch.tensor([1.0, 65504.0, -6.1e-5, 0.333], dtype=torch.float16),
        torch.tensor([1.0, 3.0e38, -1.0e-38, 0.333], dtype=torch.bfloat16),
        torch.tensor([[0, -1], [2**62, -(2**63)]], dtype=torch.int64),
        torch.tensor([True, False, False, True, True]),
        torch.tensor([1 + 2j, -3.5j], dtype=torch.complex64),
        torch.tensor([-128, 0, 127], dtype=torch.int8),
        torch.tensor(7.0, dtype=torch.float64),
    ],
    ids=["float32", "float16", "bfloat16", "int64", "bool", "complex64", "int8", "scalar_float64"],
)
def test_bytes_round_trip(t):
    data = to_bytes(t)
    assert len(data) == t.numel() * t.element_size()
    back = from_bytes(data, t.dtype, list(t.shape))
    assert back.dtype == t.dtype
    assert back.shape == t.shape
    assert torch.equal(back, t)


def test_bytes_round_trip_keeps_nan_bits():
    t = torch.tensor([float("nan"), 1.0])
    back = from_bytes(to_bytes(t), torch.float32, [2])
    assert torch.isnan(back[0])
    assert back[1] == 1.0


def test_to_bytes_is_little_endian_raw_memory():
    assert to_bytes(torch.tensor([1, 256], dtype=torch.int32)) == b"\x01\x00\x00\x00\x00\x01\x00\x00"
    assert to_bytes(torch.tensor([True, False])) == b"\x01\x00"


def test_bytes_round_trip_of_non_contiguous_tensor_uses_logical_order():
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = base.t()
    assert not t.is_contiguous()
    data = to_bytes(t)
    back = from_bytes(data, torch.float32, [3, 2])
    assert torch.equal(back, t)
    assert back.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_bytes_round_trip_of_a_strided_slice():
    t = torch.arange(10, dtype=torch.int64)[1::3]
    back = from_bytes(to_bytes(t), torch.int64, [3])
    assert back.tolist() == [1, 4, 7]


def test_bytes_round_trip_of_empty_tensor():
    t = torch.empty(0, 3, dtype=torch.float32)
    data = to_bytes(t)
    assert data == b""
    back = from_bytes(data, torch.float32, [0, 3])
    assert back.shape == (0, 3)
    assert back.dtype == torch.float32


def test_to_bytes_detaches_tensors_that_require_grad():
    t = torch.ones(2, requires_grad=True) * 2
    assert from_bytes(to_bytes(t), torch.float32, [2]).tolist() == [2.0, 2.0]


def test_from_bytes_result_is_writable_and_independent_of_the_input():
    data = to_bytes(torch.zeros(2))
    back = from_bytes(data, torch.float32, [2])
    back += 1
    assert back.tolist() == [1.0, 1.0]
    assert data == bytes(8)


@pytest.mark.parametrize(("size", "shape"), [(3, [1]), (5, [1]), (0, [1]), (4, [0])])
def test_from_bytes_with_wrong_length_raises(size, shape):
    expected = 4 * (shape[0])
    with pytest.raises(ValueError, match=f"tensor payload of {size} bytes, expected {expected}"):
        from_bytes(bytes(size), torch.float32, shape)


def test_from_bytes_with_negative_dimension_raises():
    with pytest.raises(ValueError, match="negative dimension"):
        from_bytes(b"", torch.float32, [-1, 0])


# dtype_from_name()


def test_dtype_from_name_known():
    assert dtype_from_name("float32") is torch.float32
    assert dtype_from_name("bfloat16") is torch.bfloat16
    assert dtype_from_name("bool") is torch.bool
    assert dtype_from_name("complex128") is torch.complex128


@pytest.mark.parametrize("name", ["float8_e4m3fn", "torch.float32", "Float32", "", "uint16"])
def test_dtype_from_name_unknown_raises(name):
    with pytest.raises(ValueError, match="unsupported dtype"):
        dtype_from_name(name)


# check_alloc()


def test_check_alloc_at_the_limit_passes():
    specs = [(torch.float32, [10]), (torch.float16, [2, 3]), (torch.bool, [])]
    check_alloc(specs, 40 + 12 + 1)


def test_check_alloc_over_the_limit_raises():
    specs = [(torch.float32, [10]), (torch.float16, [2, 3]), (torch.bool, [])]
    with pytest.raises(ValueError, match="outputs of 53 bytes exceed the 52-byte limit"):
        check_alloc(specs, 52)


def test_check_alloc_rejects_huge_shapes_without_allocating():
    with pytest.raises(ValueError, match="exceed"):
        check_alloc([(torch.float64, [1 << 20, 1 << 20, 1 << 20])], 1 << 40)


def test_check_alloc_rejects_negative_dimensions():
    with pytest.raises(ValueError, match="negative dimension"):
        check_alloc([(torch.float32, [4, -1])], 1 << 30)


def _bits(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32).view(torch.float32)


def test_fingerprint_is_the_sum_of_raw_bits_and_of_their_squares_modulo_2_to_the_32():
    # 70000**2 = 4_900_000_000 = 605_032_704 + 2**32, twice; (2**31 - 1)**2 = 2**62 - 2**32 + 1, which is 1 mod 2**32.
    assert fingerprint(_bits(70000, -70000, 2**31 - 1)).tolist() == [2**31 - 1, 2 * 605_032_704 + 1]
    # 2**31 - 1 + 1 wraps to -2**31 (signed int32); the squares are 1 + 1.
    assert fingerprint(_bits(2**31 - 1, 1)).tolist() == [-(2**31), 2]


def test_fingerprint_tells_apart_outputs_whose_raw_bits_sum_alike():
    assert fingerprint(_bits(1, 4)).tolist() == [5, 17]
    assert fingerprint(_bits(2, 3)).tolist() == [5, 13]


def test_fingerprint_of_a_length_not_divisible_into_words_reads_bytes():
    assert fingerprint(torch.tensor([3, 5, 250], dtype=torch.uint8)).tolist() == [258, 9 + 25 + 62500]


def test_fingerprint_covers_every_tensor_of_a_nested_output_in_order():
    assert fingerprint((_bits(1, 4), [_bits(2, 3)])).tolist() == [5, 17, 5, 13]


def test_fingerprint_in_chunks_equals_one_chunk(monkeypatch):
    x = torch.rand(1001)
    whole = fingerprint(x).tolist()
    monkeypatch.setattr(tensors, "FINGERPRINT_CHUNK", 7)
    monkeypatch.setattr(tensors, "SQUARES_CHUNK", 3)
    assert fingerprint(x).tolist() == whole
