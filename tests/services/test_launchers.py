"""Triton 3.6's per-signature C launchers, built in trusted code for later children (services.launchers)."""

from __future__ import annotations

import os

import pytest

from services.child.launchers import LauncherSignatures
from services.launchers import LauncherBuilds, build, valid_signature

ELEMENTWISE = ["*fp32", "*fp32", "i32", "constexpr"]


@pytest.mark.parametrize(
    "reported, expected",
    [
        (ELEMENTWISE, ("*fp32", "*fp32", "i32", "constexpr")),
        (["*kbf16", "nvTmaDesc", ["i64", "i64"], "fp8e4nv"], ("*kbf16", "nvTmaDesc", ("i64", "i64"), "fp8e4nv")),
        ([], ()),
    ],
)
def test_a_signature_of_tritons_type_names_is_taken_as_triton_passes_it(reported, expected):
    assert valid_signature(reported) == expected


@pytest.mark.parametrize(
    "reported",
    [
        ["*fp32", 'i32"); system("sh'],  # text that would reach the C source
        ["*fp32", 3],
        "*fp32",
        ["i32"] * 129,
        [[[["i32"]]]],  # nested deeper than a tuple argument
        ["tensordesc<fp16[64,64]>"],  # described by metadata a child would have to supply
    ],
)
def test_anything_else_a_child_reports_is_not_built(reported):
    assert valid_signature(reported) is None


class _Seed:
    def __init__(self, path: str | None):
        self.path = path
        self.added: list[str] = []

    def add(self, cache: str) -> int:
        self.added += [f for _, _, files in os.walk(cache) for f in files]
        return len(self.added)


def test_nothing_is_built_before_there_is_a_seed():
    builds = LauncherBuilds(_Seed(None))
    builds.want([ELEMENTWISE])
    assert builds._thread is None


def test_a_launcher_is_built_where_triton_builds_one_per_signature(tmp_path):
    # Triton 3.6 (the GPU machines') builds one per signature; 3.7 has one generic launcher and builds none.
    from triton.backends.nvidia import driver

    seed = _Seed(str(tmp_path))
    per_signature = hasattr(driver, "make_launcher")
    assert build(valid_signature(ELEMENTWISE), seed) is per_signature
    assert any(f.startswith("__triton_launcher") for f in seed.added) is per_signature


@pytest.mark.parametrize("tensordesc_meta, recorded", [([], True), (None, True), ([{"block": [64, 64]}], False)])
def test_a_childs_launcher_builds_are_recorded_unless_tensor_descriptors_shape_them(
    monkeypatch, tensordesc_meta, recorded
):
    # Triton 3.6 passes the compiled kernel's metadata, [] where it has no descriptors (a GPU run: the
    # recorder that took only None recorded nothing); its launcher source is then the same as with None.
    from triton.backends.nvidia import driver

    monkeypatch.setattr(driver, "make_launcher", lambda constants, signature, meta: "src", raising=False)
    signatures = LauncherSignatures()
    signatures.install()
    assert driver.make_launcher({}, {0: "*fp32", 1: ("i32", "i32")}, tensordesc_meta) == "src"
    assert signatures.take() == ([["*fp32", ["i32", "i32"]]] if recorded else [])
    assert signatures.take() == []
