"""services.child.interpreter_shims, in a process of its own (the shims change torch and Triton process-wide, as
they do in a CPU-mode child): each behaviour a GPU run gives user code.

The user module is imported under the name `kg_candidate`, as the child imports a candidate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CANDIDATE = """
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

TRITON_DEVICE = triton.runtime.driver.active.get_active_torch_device()
SM_COUNT = triton.runtime.driver.active.utils.get_device_properties(0)["multiprocessor_count"]


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 16})],
                 key=["n"], reset_to_zero=["acc_ptr"])
@triton.jit
def math_kernel(x_ptr, y_ptr, acc_ptr, eps, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = libdevice.tanh(x) + tl.extra.cuda.libdevice.erf(x) + libdevice.pow(x, 2.0) + eps.to(tl.float32)
    tl.store(y_ptr + offs, y, mask=mask)
    tl.atomic_add(acc_ptr, tl.sum(tl.where(mask, 1.0, 0.0), axis=0))


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, IEEE: tl.constexpr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
    if IEEE:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], c)


@triton.jit
def misspelt_kernel(x_ptr):
    tl.store(x_ptr, tl.tanh(tl.load(x_ptr)))


@triton.jit
def static_assert_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 64, "BLOCK must be at least 64")
    tl.store(x_ptr, 1.0)


def views(x):
    return {"is_cuda": x.is_cuda, "device": str(x.device), "get_device": x.get_device(),
            "available": torch.cuda.is_available(), "count": torch.cuda.device_count(),
            "capability": list(torch.cuda.get_device_capability()),
            "triton_device": str(TRITON_DEVICE), "sm_count": SM_COUNT}
"""

SCRIPT = """
import importlib.util, json, os, sys
sys.path.insert(0, sys.argv[1])
from services.devices import enable_cpu_redirect
enable_cpu_redirect()
import torch
import triton
spec = importlib.util.spec_from_file_location("kg_candidate", sys.argv[2])
m = importlib.util.module_from_spec(spec); sys.modules["kg_candidate"] = m; spec.loader.exec_module(m)
t = torch.ones(2)
harness = {"is_cuda": t.is_cuda, "device": str(t.device), "available": torch.cuda.is_available(),
           "count": torch.cuda.device_count()}
out = {"user": m.views(t), "harness": harness}
x = torch.linspace(-2, 2, 100)
y, acc = torch.empty_like(x), torch.zeros(1)
m.math_kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, y, acc, 1e-3, 100)
want = torch.tanh(x) + torch.erf(x) + x * x + 1e-3
out["math_err"] = float((y - want).abs().max())
out["best_block"] = m.math_kernel.best_config.kwargs["BLOCK"]
out["acc"] = float(acc[0])
a, b = torch.randn(16, 16), torch.randn(16, 16)
for ieee in (True, False):
    c = torch.empty(16, 16)
    m.dot_kernel[(1,)](a, b, c, IEEE=ieee)
    out["dot_err_ieee" if ieee else "dot_err_tf32"] = float((c - a @ b).abs().max())
failing = (("misspelt", m.misspelt_kernel, {}), ("static_assert", m.static_assert_kernel, {"BLOCK": 16}))
for name, kernel, kwargs in failing:
    try:
        kernel[(1,)](torch.ones(1), **kwargs)
        out[name] = "ran"
    except Exception as exc:
        out[name] = [c.__name__ for c in type(exc).__mro__]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("shims")
    (tmp / "cand.py").write_text(textwrap.dedent(CANDIDATE))
    (tmp / "run.py").write_text(SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, str(tmp / "run.py"), str(ROOT), str(tmp / "cand.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_user_code_sees_a_cuda_device_and_the_harness_the_cpu(observed):
    user = observed["user"]
    assert user["is_cuda"] and user["device"] == "cuda:0" and user["get_device"] == 0 and user["available"]
    assert user["count"] == 1
    assert user["capability"] == [9, 0] and user["triton_device"] == "cuda:0" and user["sm_count"] == 132
    assert observed["harness"] == {"is_cuda": False, "device": "cpu", "available": False, "count": 0}


def test_float_args_libdevice_and_autotune(observed):
    assert observed["math_err"] < 1e-5  # libdevice tanh/erf/pow in both modules, eps.to(tl.float32)
    assert observed["best_block"] == 64  # the first config that runs
    assert observed["acc"] == 100.0  # reset_to_zero undid the tuning launches' atomic adds


def test_fp32_dot_rounds_to_tf32_unless_ieee(observed):
    assert observed["dot_err_ieee"] < 1e-5
    assert 1e-4 < observed["dot_err_tf32"] < 5e-2


def test_errors_the_compiler_raises_are_compilation_errors(observed):
    assert "CompilationError" in observed["misspelt"]
    assert "CompilationError" in observed["static_assert"]
