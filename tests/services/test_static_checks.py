"""Static triage of candidate sources: one small test per rule, plus the honest bundled kernels."""

from __future__ import annotations

import ast
import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest

from services.static import HARD_CODES, Finding, triage

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted((ROOT / "services" / "bundled" / "kernels").glob("level[12]/*.py"))

PREAMBLE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def cand(body: str) -> str:
    """A candidate: the Triton preamble followed by `body`."""
    return PREAMBLE + "\n" + textwrap.dedent(body)


def line_of(src: str, needle: str) -> int:
    for i, text in enumerate(src.splitlines(), start=1):
        if needle in text:
            return i
    raise AssertionError(f"{needle!r} not in source")


def codes(src: str, code: str) -> list[tuple[int, bool]]:
    return [(f.line, f.hard) for f in triage(src) if f.code == code]


def expect(body: str, code: str, needle: str) -> None:
    """`body` yields exactly one `code` finding, on the line containing `needle`, hard iff listed."""
    src = cand(body)
    assert codes(src, code) == [(line_of(src, needle), code in HARD_CODES)], triage(src)


def expect_none(body: str, code: str) -> None:
    src = cand(body)
    assert codes(src, code) == [], triage(src)


# ---------------------------------------------------------------------------------------------
# Interface
# ---------------------------------------------------------------------------------------------


def test_interface():
    assert isinstance(HARD_CODES, frozenset)
    assert sorted(HARD_CODES) == [
        "forbidden_import",
        "no_triton_kernel",
        "numeric_flag_change",
        "package_install",
        "process_spawn",
        "timer_patch",
    ]
    f = Finding(code="x", line=1, detail="d", hard=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.line = 2  # type: ignore[misc]


def test_module_is_stdlib_only():
    for path in sorted((ROOT / "services" / "static").glob("*.py")):
        tree = ast.parse(path.read_text())
        mods = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
        mods = {m.split(".")[0] for m in mods if m != "services.static" and not m.startswith("services.static.")}
        assert mods <= set(sys.stdlib_module_names) | {"__future__"}, path.name


@pytest.mark.parametrize("src", ["def f(:\n", "class ModelNew(\n", "x = '\0'\n", "\0"])
def test_unparseable_source_gives_nothing(src):
    assert triage(src) == []


def test_never_raises_on_wrong_type():
    assert triage(None) == []  # type: ignore[arg-type]


def test_main_block_is_ignored_unless_name_is_rebound():
    body = """
    import sys
    if __name__ == "__main__":
        import subprocess
        sys.exit(torch.matmul(x, x))
    else:
        torch.cuda.synchronize = None
    """
    src = cand(body)
    assert [(f.code, f.line) for f in triage(src)] == [("timer_patch", line_of(src, "torch.cuda.synchronize"))]
    rebound = cand("__name__ = '__main__'\n" + textwrap.dedent(body))
    assert {f.code for f in triage(rebound) if f.hard} == {"forbidden_import", "process_spawn", "timer_patch"}


def test_findings_are_sorted_deduped_and_hard_by_code():
    src = cand(
        """
        import os, subprocess
        os.system("ls"); os.system("pwd")
        torch.cuda.synchronize = None
        """
    )
    found = triage(src)
    assert found == sorted(found, key=lambda f: (f.line, f.code))
    assert len({(f.code, f.line) for f in found}) == len(found)
    assert [f.code for f in found if f.code == "process_spawn"] == ["process_spawn"]
    assert all(f.hard == (f.code in HARD_CODES) for f in found)
    assert all(f.detail and f.detail.endswith(".") for f in found)


# ---------------------------------------------------------------------------------------------
# Honest kernels
# ---------------------------------------------------------------------------------------------


def test_bundled_kernels_exist():
    assert len(BUNDLED) >= 9


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_bundled_kernel_is_clean(path):
    found = triage(path.read_text())
    assert not [f for f in found if f.hard]
    assert not [f for f in found if f.code in ("torch_compute_in_forward", "exception_fallback")]
    assert found == []  # torch.empty, .contiguous(), .view(), .stride() ... are not flagged


def test_allocation_and_layout_ops_are_fine():
    expect_none(
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                a = torch.empty(x.shape, device=x.device); b = torch.empty_like(x); c = torch.zeros(4)
                y = x.contiguous().view(-1).reshape(x.shape).permute(0, 1).transpose(0, 1)
                n = x.numel() + x.size(0) + x.stride(0) + x.shape[0]
                y = F.pad(y, (0, 1)).to(torch.float32).float()
                c.zero_()
                return torch.cat([a, b]).expand(2, -1).clone()
        """,
        "torch_compute_in_forward",
    )


# ---------------------------------------------------------------------------------------------
# HARD: no_triton_kernel
# ---------------------------------------------------------------------------------------------


def test_no_triton_kernel():
    src = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    assert [(f.code, f.line, f.hard) for f in triage(src) if f.code == "no_triton_kernel"] == [
        ("no_triton_kernel", 0, True)
    ]


@pytest.mark.parametrize(
    "src",
    [
        "from triton import jit\n@jit\ndef k(x): pass\n",
        "import triton.language as tl\nfrom triton import jit as J\n@J\ndef k(x, B: tl.constexpr): pass\n",
        "import triton\n@triton.jit(do_not_specialize=['n'])\ndef k(x, n): pass\n",
        "import triton\n@triton.autotune(configs=[], key=[])\n@triton.heuristics({})\n@triton.jit\ndef k(x): pass\n",
        "import triton as tr\n@tr.jit\ndef k(x): pass\n",
        "from triton.runtime.jit import jit\n@jit\ndef k(x): pass\n",
        "from triton import *\n@jit\ndef k(x): pass\n",
        "import triton\ndef f(x): pass\nk = triton.jit(f)\n",
    ],
)
def test_triton_kernel_spellings(src):
    assert not [f for f in triage(src) if f.code == "no_triton_kernel"]


@pytest.mark.parametrize(
    "src",
    [
        "from numba import jit\n@jit\ndef k(x): pass\n",
        "import triton\n@triton.autotune(configs=[], key=[])\ndef k(x): pass\n",
        "import triton\nK = '''@triton.jit'''\n",
        "import torch\n@torch.jit.script\ndef k(x): return x\n",
    ],
)
def test_not_triton_kernels(src):
    assert [f.code for f in triage(src) if f.code == "no_triton_kernel"] == ["no_triton_kernel"]


# ---------------------------------------------------------------------------------------------
# HARD: forbidden_import
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "import subprocess",
        "import socket as s",
        "from ctypes import CDLL",
        "import multiprocessing.pool",
        "import torch.multiprocessing as mp",
        "import pip",
        "from urllib.request import urlopen",
        "import http.client",
        "import requests",
        "from asyncio import subprocess",
        "import asyncio.subprocess",
        "from os import system",
        "from os import popen, path",
        "from os import execvp",
        "from os import spawnl",
        "sp = __import__('subprocess')",
        "import importlib; importlib.import_module('socket')",
    ],
)
def test_forbidden_import(stmt):
    expect(stmt + "\n", "forbidden_import", stmt)


@pytest.mark.parametrize("stmt", ["import shutil", "import signal", "import os", "from os import path", "import math"])
def test_harmless_imports_are_not_forbidden(stmt):
    expect_none(stmt + "\n", "forbidden_import")


# ---------------------------------------------------------------------------------------------
# HARD: process_spawn
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "os.system('ls')",
        "os.popen('ls')",
        "pid = os.fork()",
        "os.execv('/bin/sh', [])",
        "os.spawnl(os.P_NOWAIT, '/bin/sh')",
        "os.posix_spawn('/bin/sh', [], {})",
        "os.kill(1, 9)",
        "os._exit(0)",
        "sys.exit(0)",
        "exit(0)",
        "quit()",
        "atexit.register(print)",
        "raise SystemExit(0)",
        "o = os; o.system('ls')",
        "getattr(os, 'system')('ls')",
    ],
)
def test_process_spawn(stmt):
    expect(f"import os, sys, atexit\n{stmt}\n", "process_spawn", stmt)


def test_process_spawn_decorator_and_from_import():
    expect("import atexit\n\n@atexit.register\ndef bye(): pass\n", "process_spawn", "@atexit.register")
    src = cand("from sys import exit as leave\n\nleave(3)\n")
    assert codes(src, "process_spawn") == [(line_of(src, "leave(3)"), True)]


# ---------------------------------------------------------------------------------------------
# HARD: timer_patch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "torch.cuda.synchronize = lambda: None",
        "torch.cuda.Event = object",
        "torch.cuda.Event.elapsed_time = lambda self, other: 0.001",
        "time.perf_counter = lambda: 0.0",
        "time.time = lambda: 0.0",
        "time.monotonic += 1",
        "triton.testing.do_bench = lambda *a, **k: 0.001",
        "torch.Tensor.__eq__ = lambda a, b: True",
        "builtins.print = None",
        "setattr(torch.cuda, 'synchronize', None)",
        "setattr(time, name, None)",
        "setattr(torch.Tensor, 'double', None)",
        "torch.cuda.__dict__['synchronize'] = None",
        "del torch.cuda.synchronize",
        "getattr(torch, 'cuda').synchronize = None",
        "torch.matmul = None",
        "import services.stats as st; st.summarize = None",
        "torch.cuda.synchronize, x = None, 1",
    ],
)
def test_timer_patch(stmt):
    expect(f"import time, builtins\nname = 'x'\n{stmt}\n", "timer_patch", stmt)


@pytest.mark.parametrize(
    "body",
    [
        "import torch.cuda as tc\ntc.synchronize = f\n",
        "from torch import cuda\ncuda.synchronize = f\n",
        "ev = torch.cuda.Event\nev.elapsed_time = f\n",
        "t = __import__('time')\nt.perf_counter = f\n",
        "import importlib\nt = importlib.import_module('torch.cuda')\nt.synchronize = f\n",
        "import sys\nsys.modules['time'].perf_counter = f\n",
    ],
)
def test_timer_patch_through_aliases(body):
    expect("f = None\n" + body, "timer_patch", "= f")


def test_config_namespaces_and_own_attributes_are_not_patches():
    expect_none(
        """
        torch._inductor.config.max_autotune = True
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.synchronize = None
        """,
        "timer_patch",
    )


# ---------------------------------------------------------------------------------------------
# HARD: package_install
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "cmd = 'pip install numpy'",
        "cmd = 'python -m pip3 install --user x'",
        "cmd = f'conda install -y {x}'",
        "cmd = 'python -m ensurepip'",
    ],
)
def test_package_install(stmt):
    expect(f"x = 1\n{stmt}\n", "package_install", stmt)


def test_package_install_ignores_docstrings():
    expect_none('def helper():\n    """Needs `pip install triton`."""\n', "package_install")


# ---------------------------------------------------------------------------------------------
# HARD: numeric_flag_change
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "torch.backends.cuda.matmul.allow_tf32 = True",
        "torch.backends.cudnn.allow_tf32 = True",
        "torch.backends.cudnn.benchmark = True",
        "torch.backends.cudnn.deterministic = False",
        "torch.backends.cudnn.enabled = False",
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True",
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True",
        "torch.set_float32_matmul_precision('medium')",
        "torch.set_default_dtype(torch.float16)",
        "torch.set_default_tensor_type(torch.HalfTensor)",
        "torch.use_deterministic_algorithms(False)",
        "setattr(torch.backends.cudnn, 'benchmark', True)",
        "torch.backends.cuda.enable_flash_sdp(False)",
    ],
)
def test_numeric_flag_change(stmt):
    expect(stmt + "\n", "numeric_flag_change", stmt)


def test_numeric_flag_change_through_alias_and_reads_are_fine():
    expect("from torch.backends import cudnn\ncudnn.benchmark = True\n", "numeric_flag_change", "cudnn.benchmark")
    expect_none("flag = torch.backends.cuda.matmul.allow_tf32\n", "numeric_flag_change")


# ---------------------------------------------------------------------------------------------
# ADVISORY: exception_fallback
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("handler", "body"),
    [
        ("except Exception:", "return torch.matmul(a, b)"),
        ("except:", "pass"),
        ("except BaseException:", "..."),
        ("except RuntimeError:", "out = F.relu(a)"),
        ("except (ValueError, RuntimeError) as e:", "pass"),
        ("except Exception:", "return a @ b"),
        ("except ImportError:", "return a.matmul(b)"),
        ("except triton.compiler.errors.CompilationError:", "pass"),
    ],
)
def test_exception_fallback(handler, body):
    src = f"""
    def run(a, b):
        out = None
        try:
            _copy[(1,)](a, b, 1, BLOCK=16)
        {handler}
            {body}
        return out
    """
    expect(src, "exception_fallback", handler)


def test_exception_fallback_to_a_layer_of_the_class():
    expect(
        """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 3, 3)

            def forward(self, x):
                try:
                    return _copy[(1,)](x, x, 1, BLOCK=16)
                except Exception as err:
                    print(err)
                    return self.conv(x)
        """,
        "exception_fallback",
        "except Exception as err",
    )


@pytest.mark.parametrize(
    ("handler", "body"),
    [("except ImportError:", "pass"), ("except KeyError:", "pass"), ("except Exception:", "raise")],
)
def test_exception_handlers_that_are_fine(handler, body):
    expect_none(f"try:\n    x = 1\n{handler}\n    {body}\n", "exception_fallback")


# ---------------------------------------------------------------------------------------------
# ADVISORY: threading
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "import threading",
        "from concurrent.futures import ThreadPoolExecutor",
        "from concurrent import futures",
        "import _thread",
        "fut = torch.jit.fork(print, 1)",
    ],
)
def test_threading(stmt):
    expect(stmt + "\n", "threading", stmt)


# ---------------------------------------------------------------------------------------------
# ADVISORY: side_stream, cuda_graph
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "s = torch.cuda.Stream()",
        "with torch.cuda.stream(s): pass",
        "torch.cuda.set_stream(s)",
        "s = torch.cuda.ExternalStream(0)",
        "torch.cuda.current_stream().wait_stream(s)",
    ],
)
def test_side_stream(stmt):
    expect(f"s = None\n{stmt}\n", "side_stream", stmt)


@pytest.mark.parametrize(
    "stmt",
    [
        "g = torch.cuda.CUDAGraph()",
        "with torch.cuda.graph(g): pass",
        "f = torch.cuda.make_graphed_callables(f, (x,))",
        "f = torch.compile(f, mode='reduce-overhead')",
    ],
)
def test_cuda_graph(stmt):
    expect(f"g = f = x = None\n{stmt}\n", "cuda_graph", stmt)


# ---------------------------------------------------------------------------------------------
# ADVISORY: tensor_subclass
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("class Lazy(torch.Tensor):\n    pass\n", "class Lazy"),
        ("from torch import Tensor\nclass Lazy(Tensor):\n    pass\n", "class Lazy"),
        ("y = torch.Tensor._make_subclass(C, x)\n", "_make_subclass"),
        (
            "class C:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None): pass\n",
            "__torch_function__",
        ),
        ("class C:\n    def __torch_dispatch__(cls, f, t, a=(), k=None): pass\n", "__torch_dispatch__"),
        ("y = x.as_subclass(C)\n", "as_subclass"),
        ("x.double = lambda: x\n", "x.double"),
        ("setattr(out, 'cpu', lambda: out)\n", "setattr"),
        ("from torch.utils._python_dispatch import TorchDispatchMode\nclass M(TorchDispatchMode): pass\n", "class M"),
    ],
)
def test_tensor_subclass(body, needle):
    expect("x = out = C = None\n" + body, "tensor_subclass", needle)


# ---------------------------------------------------------------------------------------------
# ADVISORY: frame_introspection
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "f = sys._getframe(1)",
        "f = inspect.currentframe()",
        "s = inspect.stack()",
        "objs = gc.get_objects()",
        "refs = gc.get_referrers(x)",
        "m = sys.modules['__main__']",
        "up = frame.f_back",
        "loc = frame.f_locals",
        "g = fn.__globals__",
        "d = vars(torch.cuda)",
        "d = torch.__dict__",
        "import __main__",
        "from services import evaluator",
    ],
)
def test_frame_introspection(stmt):
    expect(f"import sys, inspect, gc\nx = frame = fn = None\n{stmt}\n", "frame_introspection", stmt)


def test_own_namespace_is_fine():
    expect_none("g = globals()\nv = vars()\n", "frame_introspection")


# ---------------------------------------------------------------------------------------------
# ADVISORY: dynamic_code
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "exec(src)",
        "y = eval('1 + 1')",
        "code = compile(src, 'x', 'exec')",
        "m = __import__(src)",
        "m = importlib.import_module(src)",
        "importlib.reload(torch)",
        "b = builtins.exec(src)",
        "__builtins__['eval'](src)",
    ],
)
def test_dynamic_code(stmt):
    expect(f"import importlib, builtins\nsrc = 'x'\n{stmt}\n", "dynamic_code", stmt)


def test_compile_lookalikes_are_not_dynamic_code():
    expect_none("import re\np = re.compile('a')\nf = torch.compile\n", "dynamic_code")


# ---------------------------------------------------------------------------------------------
# ADVISORY: result_cache
# ---------------------------------------------------------------------------------------------


def test_result_cache_on_data_ptr():
    expect(
        """
        _CACHE = {}
        def run(x):
            key = (x.data_ptr(), x.shape)
            if key in _CACHE:
                return _CACHE[key]
            return x
        """,
        "result_cache",
        "if key in _CACHE",
    )


def test_result_cache_on_id():
    expect(
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                self.seen[id(x)] = x
                return x
        """,
        "result_cache",
        "self.seen[id(x)]",
    )


def test_result_cache_lru_cache_on_a_launcher():
    expect(
        """
        import functools
        @functools.lru_cache(maxsize=None)
        def launch(x):
            out = torch.empty_like(x)
            _copy[(1,)](x, out, x.numel(), BLOCK=1024)
            return out
        """,
        "result_cache",
        "@functools.lru_cache",
    )


def test_not_result_caches():
    expect_none(
        """
        from functools import lru_cache
        @lru_cache
        def num_sms(device):
            return 132
        _CONFIG = {}
        def run(x, out):
            assert x.data_ptr() % 16 == 0
            out[0] = 1
            cfg = _CONFIG.get(tuple(x.shape))
            return out
        """,
        "result_cache",
    )


# ---------------------------------------------------------------------------------------------
# ADVISORY: torch_compute_in_forward
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "y = torch.matmul(x, x)",
        "y = torch.bmm(x, x)",
        "y = torch.einsum('ij,jk->ik', x, x)",
        "y = torch.softmax(x, dim=-1)",
        "y = F.softmax(x, dim=-1)",
        "y = nn.functional.layer_norm(x, x.shape[-1:])",
        "y = F.conv2d(x, x)",
        "y = x @ x",
        "y = x.matmul(x)",
        "y = x.sum(dim=1)",
        "y = torch._scaled_mm(x, x)",
        "y = torch.compile(torch.relu)(x)",
        "y = torch.ops.aten.mm(x, x)",
        "y = nn.Linear(4, 4)(x)",
    ],
)
def test_torch_compute_in_forward(stmt):
    body = f"""
    class ModelNew(nn.Module):
        def forward(self, x):
            {stmt}
            return y
    """
    expect(body, "torch_compute_in_forward", stmt)


def test_torch_compute_through_helpers_layers_and_bases():
    src = cand(
        """
        def helper(x):
            return torch.mm(x, x)

        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x)

        class ModelNew(Model):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.w = nn.Parameter(torch.randn(4, 4) @ torch.randn(4, 4))

            def _inner(self, x):
                return F.gelu(x)

            def forward(self, x):
                x = helper(x)
                x = self._inner(x)
                x = self.fc(x)
                return super().forward(x)

        def unused(x):
            return torch.matmul(x, x)
        """
    )
    lines = [line for line, _ in codes(src, "torch_compute_in_forward")]
    assert lines == [
        line_of(src, "torch.mm"),
        line_of(src, "torch.relu"),
        line_of(src, "F.gelu"),
        line_of(src, "self.fc(x)"),
    ]


def test_torch_compile_anywhere():
    expect("fast = torch.compile(lambda x: x)\n", "torch_compute_in_forward", "torch.compile")


# ---------------------------------------------------------------------------------------------
# ADVISORY: file_io
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "fh = open('/tmp/cache.bin', 'wb')",
        "fh = open(path, 'a')",
        "fh = open(file=path, mode='w')",
        "fh = open('/etc/passwd')",
        "os.remove(path)",
        "os.makedirs(path)",
        "shutil.rmtree(path)",
        "Path(path).write_text('x')",
        "p = '/dev/shm/replay'",
        "torch.save(x, path)",
    ],
)
def test_file_io(stmt):
    expect(f"import os, shutil\nfrom pathlib import Path\npath = x = 'p'\n{stmt}\n", "file_io", stmt)


def test_relative_reads_and_writes_are_fine():
    expect_none("a = open('notes.txt').read()\nb = open('log.txt', 'w')\n", "file_io")


# ---------------------------------------------------------------------------------------------
# ADVISORY: precision_downgrade
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    [
        "y = x.half()",
        "y = x.bfloat16()",
        "y = x.to(torch.float16)",
        "y = x.to(x.device, torch.bfloat16)",
        "y = x.to(dtype=torch.half)",
        "y = x.to(torch.float8_e4m3fn)",
        "y = x.to(tl.float16)",
        "y = tl.cast(x, tl.bfloat16)",
        "y = tl.dot(x, x, allow_tf32=True)",
        "y = tl.dot(x, x, input_precision='tf32')",
        "y = tl.dot(x, x, input_precision='tf32x3')",
        "y = tl.dot(x, x)",
        "with torch.autocast('cuda'): pass",
    ],
)
def test_precision_downgrade(stmt):
    expect(f"x = None\n{stmt}\n", "precision_downgrade", stmt)


def test_full_precision_casts_are_fine():
    expect_none(
        """
        @triton.jit
        def k(a_ptr, out_ptr, BLOCK: tl.constexpr):
            a = tl.load(a_ptr + tl.arange(0, BLOCK)).to(tl.float32)
            acc = tl.dot(a, a, input_precision="ieee")
            tl.store(out_ptr + tl.arange(0, BLOCK), acc.to(out_ptr.dtype.element_ty))
        """,
        "precision_downgrade",
    )


# ---------------------------------------------------------------------------------------------
# ADVISORY: env_mutation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stmt",
    ["os.environ['NVIDIA_TF32_OVERRIDE'] = '1'", "os.environ.update(A='1')", "os.putenv('A', '1')"],
)
def test_env_mutation(stmt):
    expect(f"import os\n{stmt}\n", "env_mutation", stmt)
