"""Guards installed in a candidate child before the candidate is imported.

They run in the untrusted process, so they are defence in depth, not the boundary (the boundary is the
parent: its own comparisons, clocks and /proc reads). Each one turns a known cheat into a reported,
machine-readable violation:

- a launch hook counts the Triton kernels *defined by the candidate* that each call launches (B7/B8);
- an integrity snapshot of the callables the harness relies on, and of the global numeric flags,
  is compared after import and after every call (A4/A10/C2);
- an audit hook blocks and reports sockets, process spawning and writes outside the private
  directory (C3/C4), which Python raises as events however they are reached from Python code. It is installed in
  both children, before the reference is imported: a request's reference is user code too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from collections import Counter
from typing import Any

import torch

from services.protocol import channel, messages, tensors

CANDIDATE_MODULE = "kg_candidate"
# Executables Triton itself runs: ptxas, the C compiler for its launcher stub, ldconfig to find libcuda, and
# `file`, which Python's platform.architecture() runs for the key of Triton's build cache.
_TOOLCHAIN = {
    "file",
    "ldconfig",
    "ptxas",
    "cc",
    "gcc",
    "g++",
    "c++",
    "clang",
    "clang++",
    "ld",
    "nvdisasm",
    "cuobjdump",
    "nvlink",
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_NET_FAMILIES = {2, 10}  # AF_INET, AF_INET6
_TWO_PATH_EVENTS = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.move"}
_PATH_EVENTS = _TWO_PATH_EVENTS | {
    "os.remove",
    "os.rmdir",
    "os.mkdir",
    "os.truncate",
    "os.chmod",
    "os.chown",
    "shutil.rmtree",
}
_NET_EVENTS = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo"}
_FORK_EVENTS = {"os.system", "os.fork", "os.forkpty", "pty.spawn"}
_AUDITED = (
    _PATH_EVENTS
    | _NET_EVENTS
    | _FORK_EVENTS
    | {"open", "socket.__new__", "subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn", "os.kill", "os.killpg"}
)


class LaunchRecorder:
    """Counts launches of the candidate's own `@triton.jit` functions, by kernel name, and can neutralise them.

    A CUDA graph replay launches what was captured without going through Triton's `run`, so each graph
    remembers the kernels launched while it was captured and every replay counts them again.

    While `neutralised` (the output-dependence check), a launch of a candidate kernel binds its arguments and
    compiles as usual (Triton's `warmup=True`, so it returns what a launch returns) but runs nothing on the
    device, and a graph that captured candidate kernels is not replayed; both still count as launches.
    Autotune's benchmarking launches go through the same `run`, so none of the candidate's kernels runs."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.neutralised = False
        self._captured: dict[int, tuple[Any, Counter[str]]] = {}

    def install(self) -> None:
        from triton.runtime.jit import JITFunction

        classes: list[type] = [JITFunction]
        if os.environ.get("TRITON_INTERPRET") == "1":
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        for cls in classes:
            self._wrap(cls)
        self._wrap_graphs(torch.cuda.CUDAGraph)

    def _wrap(self, cls: type) -> None:
        original = cls.run
        recorder = self

        def run(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            fn = getattr(fn_self, "fn", None)
            launch = not kwargs.get("warmup") and getattr(fn, "__module__", None) == CANDIDATE_MODULE
            if launch and recorder.neutralised:
                kwargs["warmup"] = True
            result = original(fn_self, *args, **kwargs)
            if launch:
                recorder.counts[fn.__name__] += 1
            return result

        run.__wrapped__ = original
        cls.run = run

    def _wrap_graphs(self, cls: type) -> None:
        begin, end, replay = cls.capture_begin, cls.capture_end, cls.replay
        before: dict[int, Counter[str]] = {}
        recorder = self

        def capture_begin(graph: Any, *args: Any, **kwargs: Any) -> Any:
            before[id(graph)] = recorder.counts.copy()
            return begin(graph, *args, **kwargs)

        def capture_end(graph: Any, *args: Any, **kwargs: Any) -> Any:
            result = end(graph, *args, **kwargs)
            launched = recorder.counts - before.pop(id(graph), Counter())
            # Holding the graph keeps its id from being reused by another graph. Launches neutralised during
            # the capture never reached it.
            recorder._captured[id(graph)] = (graph, Counter() if recorder.neutralised else launched)
            return result

        def replay_(graph: Any, *args: Any, **kwargs: Any) -> Any:
            kernels = recorder._captured.get(id(graph), (None, Counter()))[1]
            result = None if recorder.neutralised and kernels else replay(graph, *args, **kwargs)
            recorder.counts.update(kernels)
            return result

        for name, wrapper, original in (
            ("capture_begin", capture_begin, begin),
            ("capture_end", capture_end, end),
            ("replay", replay_, replay),
        ):
            wrapper.__wrapped__ = original
            setattr(cls, name, wrapper)

    def take(self) -> dict[str, int]:
        out = dict(self.counts)
        self.counts.clear()
        return out


def numeric_flags() -> dict[str, Any]:
    """Global state that changes numerics or the reference's speed if a candidate flips it."""
    probes = {
        "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": lambda: (
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": lambda: (
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
        "cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
        "cudnn.enabled": lambda: torch.backends.cudnn.enabled,
        "default_dtype": lambda: str(torch.get_default_dtype()),
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
    }
    flags = {}
    for name, probe in probes.items():
        try:
            flags[name] = probe()
        except Exception as exc:  # an attribute missing in this torch version is itself a stable value
            flags[name] = f"unavailable: {type(exc).__name__}"
    return flags


class Integrity:
    """Callables and objects whose replacement would let a candidate fake a time, a sync, an input, a tensor
    delivery or a message, each found again by its owner and attribute at every snapshot; `module`'s `names`
    and `classes` add the runtime's own (named by it, so this module needs none). Where each one lives is
    worked out once: a snapshot is taken at every reply, between the timed calls of a measurement."""

    def __init__(self, module: Any, names: tuple[str, ...], classes: tuple[type, ...] = ()):
        import builtins

        from triton.runtime.jit import JITFunction

        owners: list[tuple[str, Any, tuple[str, ...]]] = [
            (module.__name__, module, names),
            (
                "torch.cuda",
                torch.cuda,
                ("synchronize", "Event", "current_stream", "default_stream", "Stream", "_sleep", "default_generators"),
            ),
            (
                "torch",
                torch,
                ("manual_seed", "empty", "rand", "randn", "randint", "device", "no_grad", "Tensor", "equal"),
            ),
            ("time", time, ("perf_counter", "monotonic", "time", "sleep")),
            ("json", json, ("dumps", "loads")),
            ("os", os, ("write", "read", "getcwd")),
            ("dataclasses", dataclasses, ("asdict", "fields")),
            (channel.__name__, channel, ("send", "recv", "_write_all", "_read_exact")),
            (
                tensors.__name__,
                tensors,
                (
                    "describe",
                    "to_bytes",
                    "open_cuda",
                    "tensor_specs",
                    "dtype_from_name",
                    "fingerprint",
                    "_chunked",
                    "_sum_int32",
                    "_sum_of_squares",
                ),
            ),
            (messages.__name__, messages, ("reply_header", "parse_command")),
            (
                __name__,
                sys.modules[__name__],
                ("numeric_flags", "changed", "Integrity", "AuditGuard", "LaunchRecorder"),
            ),
            (
                "torch.Tensor",
                torch.Tensor,
                (
                    "copy_",
                    "clone",
                    "zero_",
                    "fill_",
                    "sum",
                    "to",
                    "contiguous",
                    "reshape",
                    "view",
                    "numel",
                    "detach",
                    "untyped_storage",
                    "set_",
                    "elapsed_time",
                ),
            ),
            (
                "builtins",
                builtins,
                ("type", "isinstance", "len", "getattr", "int", "float", "sum", "min", "max", "open", "__import__"),
            ),
            ("triton.JITFunction", JITFunction, ("run",)),
            ("torch.cuda.CUDAGraph", torch.cuda.CUDAGraph, ("capture_begin", "capture_end", "replay")),
        ]
        self.sources = [(f"{prefix}.{attr}", owner, attr) for prefix, owner, attrs in owners for attr in attrs]
        # Every method of these classes, those added later included (a class-level __getattribute__, say).
        self.classes = [
            (f"{cls.__module__}.{cls.__qualname__}.", cls)
            for cls in (torch.cuda.Event, LaunchRecorder, AuditGuard, Integrity, *classes)
        ]

    def snapshot(self) -> dict[str, tuple[Any, Any]]:
        """Each critical object with its code object. Holding the references keeps them alive, so a
        comparison by identity cannot be fooled by a recycled id; code objects are immutable, so swapping a
        function's `__code__` shows as a different code object."""
        found = {}
        for key, owner, attr in self.sources:
            obj = getattr(owner, attr, None)
            found[key] = (obj, getattr(obj, "__code__", None))
        for prefix, cls in self.classes:
            for attr, obj in vars(cls).items():
                if callable(obj):
                    found[prefix + attr] = (obj, getattr(obj, "__code__", None))
        return found


def changed(before: dict[str, tuple[Any, Any]], after: dict[str, tuple[Any, Any]]) -> list[str]:
    """Names whose object or code object is not the same one, or that are only in one snapshot."""
    found = [
        k
        for k, (obj, code) in before.items()
        if (now := after.get(k)) is None or now[0] is not obj or now[1] is not code
    ]
    return sorted([*found, *(after.keys() - before.keys())])


class AuditGuard:
    """Blocks and records what user code, a candidate's or a request's reference, must not do, via CPython audit
    events. Once added, an audit hook cannot be removed from Python code."""

    def __init__(self, private_dir: str):
        self.private_dir = os.path.realpath(private_dir)
        self.violations: list[str] = []
        self.active = False

    def install(self) -> None:
        if not self.active:
            sys.addaudithook(self._hook)
            self.active = True

    def take(self) -> list[str]:
        out, self.violations = self.violations, []
        return out

    def _deny(self, what: str) -> None:
        if len(self.violations) < 20:
            self.violations.append(what)
        raise PermissionError(f"KernelGym sandbox: {what}")

    def _outside(self, path: Any) -> bool:
        if isinstance(path, int):
            return False
        try:
            full = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return True
        return not (full == self.private_dir or full.startswith(self.private_dir + os.sep) or full == "/dev/null")

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        # The first test keeps the hook cheap on the frequent events it ignores (every read of a `__code__`).
        if event not in _AUDITED or not self.active:
            return
        if event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and self._outside(path):
                shown = path if isinstance(path, int) else os.fsdecode(path)
                self._deny(f"write to {shown} outside the private directory")
        elif event == "os.rmdir" and args and self._outside(args[0]):
            # Refused but not held against the candidate: Triton's cache calls os.removedirs, which walks up
            # past the private directory and stops at the first refusal. A refused rmdir changes nothing.
            raise PermissionError("KernelGym sandbox: rmdir outside the private directory")
        elif event in _PATH_EVENTS:
            paths = args[:2] if event in _TWO_PATH_EVENTS else args[:1]
            if any(self._outside(p) for p in paths):
                self._deny(f"{event} outside the private directory")
        elif event == "socket.__new__":
            if len(args) > 1 and args[1] in _NET_FAMILIES:
                self._deny("opening a network socket")
        elif event in _NET_EVENTS:
            self._deny(f"network access ({event})")
        elif event == "subprocess.Popen":
            exe = args[0] if args and args[0] else (args[1][0] if len(args) > 1 and args[1] else "")
            self._check_spawn(exe)
        elif event in ("os.posix_spawn", "os.exec"):
            self._check_spawn(args[0] if args else "")
        elif event == "os.spawn":
            self._check_spawn(args[1] if len(args) > 1 else "")
        elif event in _FORK_EVENTS:
            self._deny(f"spawning a process ({event})")
        elif event in ("os.kill", "os.killpg") and args and args[0] not in (0, os.getpid()):
            self._deny(f"signalling another process ({event})")

    def _check_spawn(self, exe: Any) -> None:
        """Only the toolchain may run, and not from the private directory: a script the candidate wrote there
        and named `ptxas` is denied like any other program. A name not on PATH cannot run at all."""
        try:
            called = os.fsdecode(exe)
        except (TypeError, ValueError):
            called = repr(exe)
        name = os.path.basename(called)
        resolved = shutil.which(called) if os.sep not in called else called
        toolchain = bool({name, name.split("-")[0], name.rsplit("-", 1)[-1]} & _TOOLCHAIN)
        if not toolchain or (resolved and not self._outside(resolved)):
            self._deny(f"spawning a process ({name or called})")


_GUARD: AuditGuard | None = None


def audit_guard(private_dir: str) -> AuditGuard:
    """The process's one audit guard: a kept reference child's every job shares the hook its first installed."""
    global _GUARD
    if _GUARD is None:
        _GUARD = AuditGuard(private_dir)
    return _GUARD
