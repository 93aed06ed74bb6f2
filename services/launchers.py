"""Triton 3.6's per-signature C launchers, built in trusted code and planted in later children's Triton caches.

Triton 3.6 (the GPU machines') builds a small C module with the C compiler at a kernel's first launch, one per
kernel signature, cached under a hash of its source: 0.27 s of CPU for a four-argument signature on a development
machine. A child's Triton cache is private, so every candidate paid it in its first call, outside the compile
hook. A candidate child reports the signatures it built launchers for (`Called.launchers`,
services.child.launchers); the parent keeps those made of Triton's type names alone and builds each once, with
Triton's own `make_launcher` and `compile_module_from_src` in a subprocess of its own, into a staging cache whose
entries it then copies whole into the seed that every later GPU child's cache is planted from
(`services.sandbox._DriverSeed`). Nothing a child built is ever copied: a candidate could plant a module there.
Triton 3.7 has one generic launcher and reports nothing. It saves time and decides nothing: where a build fails,
a child builds its launcher as before.

    python -m services.launchers '["*fp32", "*fp32", "i32", "constexpr"]'   # one build, into TRITON_CACHE_DIR
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

# Triton's scalar and pointer type names (`*` a pointer, `k` a constant one), and its two markers.
_TYPE = re.compile(
    r"\*?k?(fp8e4nv|fp8e4b8|fp8e4b15|fp8e5|fp8e5b16|fp16|bf16|fp32|fp64|i1|i8|i16|i32|i64|u1|u8|u16|u32|u64)"
    r"|constexpr|nvTmaDesc"
)
MAX_ARGUMENTS = 128
MAX_BUILDS = 256  # per process: a seed of at most a few MB


def valid_signature(raw: Any, depth: int = 0) -> tuple[Any, ...] | None:
    """A reported signature as Triton passes it (tuples for tuple arguments), or None where any entry is not one
    of Triton's type names."""
    if not isinstance(raw, list) or len(raw) > MAX_ARGUMENTS or depth > 2:
        return None
    out: list[Any] = []
    for entry in raw:
        if isinstance(entry, list):
            inner = valid_signature(entry, depth + 1)
            if inner is None:
                return None
            out.append(inner)
        elif isinstance(entry, str) and _TYPE.fullmatch(entry):
            out.append(entry)
        else:
            return None
    return tuple(out)


class Seed(Protocol):
    """Where later children's Triton caches are planted from (services.sandbox._DriverSeed)."""

    path: str | None

    def add(self, cache: str) -> int: ...


class LauncherBuilds:
    """Builds each new valid signature's launcher, one at a time on a daemon thread, into `seed` (none while the
    seed has no directory yet)."""

    def __init__(self, seed: Seed) -> None:
        self.seed = seed
        self._reset()

    def _reset(self) -> None:
        self._wanted: set[tuple[Any, ...]] = set()
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def want(self, reported: list[Any]) -> None:
        """Signatures a candidate child reported (at most 8 a call are looked at)."""
        if self.seed.path is None:
            return
        for raw in reported[:8]:
            signature = valid_signature(raw)
            with self._lock:
                if signature is None or signature in self._wanted or len(self._wanted) >= MAX_BUILDS:
                    continue
                self._wanted.add(signature)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._serve, name="kg-launchers", daemon=True)
                    self._thread.start()
            self._queue.put(signature)

    def _serve(self) -> None:
        while True:
            signature = self._queue.get()
            try:
                build(signature, self.seed)
            except Exception:  # a build that went wrong in an unforeseen way costs that launcher, not the thread
                log.exception("no launcher for %s", signature)


def build(signature: tuple[Any, ...], seed: Seed) -> bool:
    """One launcher, built by a subprocess into a staging cache whose entries then go whole into `seed`; whether
    any did."""
    staging = tempfile.mkdtemp(prefix="kernelgym-launcher-")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "services.launchers", json.dumps(signature)],
            env={**os.environ, "TRITON_CACHE_DIR": staging, "PYTHONPATH": _python_path()},
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            log.info("no launcher for %s: %s", signature, done.stderr.strip()[-300:])
            return False
        return seed.add(staging) > 0
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no launcher for %s: %s", signature, exc)
        return False
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _python_path() -> str:
    """This project first, wherever the worker was started from (as a child's)."""
    root = str(Path(__file__).resolve().parent.parent)
    return os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)


def _build_here(signature: tuple[Any, ...]) -> None:
    """What Triton 3.6's `CudaLauncher` does for a kernel of this signature, into TRITON_CACHE_DIR."""
    from triton.backends.nvidia import driver
    from triton.runtime.build import compile_module_from_src

    src = driver.make_launcher({}, dict(enumerate(signature)), None)
    # Built and cached before it is loaded: loading needs the CUDA driver, which a GPU child has.
    with contextlib.suppress(ImportError):
        compile_module_from_src(
            src=src,
            name="__triton_launcher",
            library_dirs=driver.library_dirs(),
            include_dirs=driver.include_dirs,
            libraries=driver.libraries,
        )


if __name__ == "__main__":
    parsed = valid_signature(json.loads(sys.argv[1]))
    if parsed is None:
        sys.exit("not a kernel signature")
    _build_here(parsed)
