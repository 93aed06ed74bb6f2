"""What a child may write: its own directory only, whether the write comes through Python (the audit hook refuses
it) or through native code the hook does not see (Landlock refuses it). A planted file could be code in a later
child: another child's Triton cache, or the seed every GPU child's cache starts from."""

from __future__ import annotations

import contextlib
import ctypes
import os
import uuid

import pytest
from helpers import bundled_source

from services.evaluator import Evaluator
from services.schema import EvalOptions, Verdict
from services.settings import EvalSettings


def _landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return max(0, libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))


needs_landlock = pytest.mark.skipif(_landlock_abi() < 1, reason="the kernel has no Landlock")

NATIVE_WRITES = """
import contextlib
import torch as _t

with contextlib.suppress(Exception):  # torch's own file mapping: no `open` event for the audit hook
    _t.from_file({mapped!r}, shared=True, size=16, dtype=_t.uint8).fill_(65)
with contextlib.suppress(Exception):  # torch.save's archive writer opens its file in C++
    _t.save(_t.zeros(4), {saved!r})
"""


@needs_landlock
def test_a_candidates_native_writes_outside_its_directory_do_not_happen(relu, tmp_path):
    mapped, saved = tmp_path / "mapped", tmp_path / "saved.pt"
    source = bundled_source("level1/1_ReLU") + NATIVE_WRITES.format(mapped=str(mapped), saved=str(saved))
    with Evaluator(EvalSettings(correctness_trials=1, warm_children=0)) as ev:
        result = ev.evaluate(relu, source, EvalOptions(device="cpu", timing=False)).result
    assert result.verdict is Verdict.PASSED, result.feedback  # the attempts failed quietly; the kernel is honest
    assert not mapped.exists() and not saved.exists()
    assert f"files: landlock ABI {_landlock_abi()}" in result.environment.containment  # the result says so


@needs_landlock
def test_a_candidate_makes_no_file_in_dev_shm_and_truncates_none_there(relu):
    """/dev/shm holds the parent's CUDA IPC counting files: a child may write or remove one, never make one (host
    memory) or truncate one (the parent, which maps it, would die of SIGBUS)."""
    made, existing = f"/dev/shm/kg-test-{uuid.uuid4().hex}", f"/dev/shm/kg-test-{uuid.uuid4().hex}"
    with open(existing, "wb") as f:
        f.write(b"\0" * 64)
    attempts = f"""
import contextlib
import torch as _t

for path in ({made!r}, {existing!r}):  # the second grows a file that exists: a truncate
    with contextlib.suppress(Exception):
        _t.from_file(path, shared=True, size=4096, dtype=_t.uint8).fill_(65)
"""
    try:
        with Evaluator(EvalSettings(correctness_trials=1, warm_children=0)) as ev:
            result = ev.evaluate(
                relu, bundled_source("level1/1_ReLU") + attempts, EvalOptions(device="cpu", timing=False)
            )
        assert result.result.verdict is Verdict.PASSED, result.result.feedback
        assert not os.path.exists(made)
        if _landlock_abi() >= 3:  # truncating is a right of its own from Landlock's third ABI
            assert os.path.getsize(existing) == 64
    finally:
        for path in (made, existing):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
