"""Starting, supervising and killing the untrusted child processes.

Each child is a fresh `python -m services.child`, or a process forked by the zygote that has already done its
imports (services.zygote; `EvalSettings.fork_children`), in its own session, with every process it starts
kept below it (a subreaper), able to signal only itself (services.child.boot) and killed with it
(`Child.kill`), with a scrubbed environment, a private temporary directory as HOME, cwd and Triton
cache, resource limits, and one supervisor thread in the parent process that enforces every child's host
memory and process-count limits from outside (limits set inside a child can be raised again by a root child).
Children are started ahead of need (`ChildPool`) so torch is already imported when a job arrives;
a child that received a job is never given another one.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from services import procfs
from services.device_lock import lock_files, want_file
from services.errors import ChildDied, ChildTimedOut
from services.launchers import LauncherBuilds
from services.protocol import channel
from services.protocol.messages import NEEDED_NOW, WARM_UP_BETWEEN, read_start_stage
from services.schema import PROTOCOL_VERSION
from services.settings import EvalSettings
from services.zygote import ForkedProcess, ZygoteUnavailable, spawn_forked, start_module

_log = logging.getLogger(__name__)

# Variables a child may inherit; everything else (API keys, Redis URLs, cloud credentials) is dropped.
_ENV_KEEP = {"PATH", "LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "PYTHONPATH"}
_ENV_KEEP_PREFIXES = ("CUDA_VISIBLE", "NVIDIA_", "TRITON_PTXAS", "TRITON_CUOBJDUMP", "TRITON_NVDISASM")
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
TRITON_CACHE = ".triton"  # a child's Triton cache, in its private directory


def child_env(device: str, tmpdir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP or k.startswith(_ENV_KEEP_PREFIXES)}
    # Absolute entries only: an empty or relative one would search the child's own directory, where a candidate of
    # the same user can write, for modules (children start with `python -P` for the same reason).
    search = (_PROJECT_ROOT, *env.get("PYTHONPATH", "").split(os.pathsep))
    env["PYTHONPATH"] = os.pathsep.join(p for p in search if os.path.isabs(p))
    env.update(
        HOME=tmpdir,
        TMPDIR=tmpdir,
        TRITON_CACHE_DIR=os.path.join(tmpdir, TRITON_CACHE),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONHASHSEED="0",
        # One intra-op thread: no lazily started pools that would look like a candidate's threads.
        OMP_NUM_THREADS="1",
        # torch.compile of the reference compiles in its own process: the sandbox refuses a pool of workers.
        TORCHINDUCTOR_COMPILE_THREADS="1",
    )
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    if device in ("cpu", "compiler"):  # a compiler child compiles for the GPU, but never reaches one
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def thread_ids(pid: int) -> set[int]:
    """OS threads of a process, read from outside (a child cannot hide them from /proc)."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


# `services.child` caps a CPU child's address space at MEM_MB plus this headroom (torch's library mappings).
AS_HEADROOM_MB = 16384


def _hard_limit_mb(which: int) -> float:
    """This process's hard limit in MiB (inf when unlimited): its children inherit it and cannot raise it."""
    hard = resource.getrlimit(which)[1]
    return math.inf if hard == resource.RLIM_INFINITY else hard / 2**20


def child_limits(device: str, settings: EvalSettings) -> tuple[int, int]:
    """MEM_MB and FILE_MB of a child's command line, within the hard limits it inherits (Slurm, containers,
    `ulimit -v`), since setting a limit above one fails. Where the inherited address-space limit is already
    lower than the backstop, the child keeps it (MEM_MB 0) and the watchdog still enforces memory_limit_mb."""
    mem_mb = settings.memory_limit_mb if device != "cuda" else 0  # CUDA reserves far more than it uses
    if mem_mb and mem_mb + AS_HEADROOM_MB > _hard_limit_mb(resource.RLIMIT_AS):
        mem_mb = 0
    return mem_mb, int(min(settings.max_file_mb, _hard_limit_mb(resource.RLIMIT_FSIZE)))


def copy_cache(src: str, dst: str, limit_bytes: int) -> int:
    """Copy the entries of Triton cache `src` (a directory of files per compilation) that `dst` lacks, regular
    files only, up to `limit_bytes` in all; each entry appears whole (renamed into place). Files copied."""
    copied = total = 0
    try:
        entries = [e for e in os.scandir(src) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    os.makedirs(dst, exist_ok=True)
    for entry in entries:
        target = os.path.join(dst, entry.name)
        if entry.name.startswith(".") or os.path.lexists(target):
            continue
        files = [f for f in os.scandir(entry.path) if f.is_file(follow_symlinks=False)]
        size = sum(f.stat(follow_symlinks=False).st_size for f in files)
        if total + size > limit_bytes:
            continue
        staging = os.path.join(dst, f".{entry.name}.part")
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        for f in files:
            shutil.copyfile(f.path, os.path.join(staging, f.name), follow_symlinks=False)
        os.rename(staging, target)
        total += size
        copied += len(files)
    return copied


def _available_memory() -> str:
    """The host's MemAvailable (what can be allocated without swapping), as text for an error."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return f"{int(line.split()[1]) >> 10} MB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


class Child:
    """One untrusted child process and the parent's end of its private channel."""

    def __init__(self, device: str, settings: EvalSettings):
        self.device = device
        self.settings = settings
        self.tmpdir = tempfile.mkdtemp(prefix="kernelgym-")
        self.nonce: str | None = None
        self.network = "unknown"
        self.containment = "unknown"
        self._seq = self._posted = 0  # replies received, commands sent
        self.jobs = 0  # jobs started in it: more than one only for a kept reference child
        self.ready_threads: set[int] = set()  # its OS threads when it said it was ready, before any job
        self._violation: str | None = None
        self._closed = False
        self.closed_at = 0.0
        # The next job's start waits for this child to be gone once closed (`drain`): it may hold device memory
        # that job needs. Cleared for a child that held only small tensors (services.parent.link).
        self.awaited = True
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # The child's stdout/stderr go to files in its directory: informational only, never parsed.
        if device in ("cuda", "compiler"):
            _SEED.plant(os.path.join(self.tmpdir, TRITON_CACHE))
        with (
            open(os.path.join(self.tmpdir, ".stdout"), "wb") as out,
            open(os.path.join(self.tmpdir, ".stderr"), "wb") as err,
        ):
            self.proc = self._spawn(device, to_child_r, from_child_w, out, err)
        os.close(to_child_r)
        os.close(from_child_w)
        self._ready = False
        self.started = time.monotonic()
        self.waited_ready_s = self.waited_drain_s = 0.0
        _SUPERVISOR.watch(self)

    def _spawn(
        self, device: str, to_child_r: int, from_child_w: int, out: Any, err: Any
    ) -> subprocess.Popen | ForkedProcess:
        limits = child_limits(device, self.settings)
        env = child_env(device, self.tmpdir)
        if device == "cuda" and self.settings.device_lock:
            want = want_file(self.settings.device_lock)
            env[WARM_UP_BETWEEN] = f"{want}:{self.settings.child_warm_up_wait_s}"
        if self.settings.fork_children:
            try:
                return spawn_forked(
                    env, device, self.tmpdir, limits, [to_child_r, from_child_w, out.fileno(), err.fileno()]
                )
            except ZygoteUnavailable as exc:  # the child starts as a command instead: slower, the same child
                _log.warning("starting a child as a command: %s", exc)
        args = [str(to_child_r), str(from_child_w), device, *map(str, limits)]
        return start_module("services.child", args, (to_child_r, from_child_w), env, self.tmpdir, out, err)

    # -- lifecycle ---------------------------------------------------------------------------------
    def wait_ready(self, deadline: float) -> None:
        if self._ready:
            return
        try:
            header, _ = self._recv(deadline, expect_nonce=False)
        except ChildTimedOut:
            raise ChildTimedOut(self._late_start()) from None
        if header.get("msg") != "ready" or header.get("pid") != self.proc.pid:
            raise channel.ProtocolError(f"unexpected first message {header!r:.200}")
        if header.get("protocol") != PROTOCOL_VERSION:  # a child from another install: never mix the two
            raise channel.ProtocolError(f"the child speaks {header.get('protocol')!r:.60}, not {PROTOCOL_VERSION}")
        self.network = str(header.get("network", "unknown"))
        self.containment = (
            f"{header.get('processes', 'unknown')}; signals: {header.get('signals', 'unknown')}; "
            f"files: {header.get('files', 'unknown')}; capabilities: {header.get('capabilities', 'unknown')}"
        )
        self._ready = True
        self.ready_threads = self.threads()
        if self.device == "cuda":  # before its job: nothing but the trusted warm-up has run in it
            _SEED.take(os.path.join(self.tmpdir, TRITON_CACHE))
            _CHILD_EVENTS.extend(("start", a, b) for a, b in _working(self.started, time.monotonic(), header))

    def _late_start(self) -> str:
        """Why a start ran late, as far as the parent can tell: the child's last step and the host's load."""
        step = read_start_stage(self.tmpdir) or "before its first step"
        load = os.getloadavg()[0]
        return (
            f"not ready {time.monotonic() - self.started:.0f} s after it was started, at: {step}; host load "
            f"average {load:.1f} over {os.cpu_count()} CPUs, {_available_memory()} of memory available"
        )

    def start_job(self, job: dict[str, Any], deadline: float) -> None:
        t0 = time.monotonic()
        self.wait_ready(deadline)
        t1 = time.monotonic()
        _SUPERVISOR.drain()  # the awaited children this process closed have freed their GPU memory
        # What the start waited for, reported in the evaluation's phases: a child still starting, and the
        # children this process closed before (a CUDA child takes a second or more to die under load).
        self.waited_ready_s, self.waited_drain_s = t1 - t0, time.monotonic() - t1
        self.nonce = job["nonce"]
        self._seq = self._posted = 0  # a kept reference child's next job counts its replies afresh
        self.jobs += 1
        self._send({"cmd": "job", **job})  # a child that died after saying it was ready: ChildDied, the machine's

    def idle(self) -> bool:
        """Started, not closed, and every command it was sent answered: another job may follow on this channel.
        Whether it is still alive is not asked (a forked child's status waits for the zygote's lock): a dead child
        fails its next job's start."""
        return self._ready and not self._closed and not self._violation and self._posted == self._seq

    def request(
        self, header: dict[str, Any], deadline: float, payloads: list[bytes] | None = None
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Send a command and return the child's authenticated reply."""
        self.post(header, payloads)
        return self.reply(deadline)

    def post(self, header: dict[str, Any], payloads: list[bytes] | None = None) -> None:
        """Send a command; `reply` collects the answer, so the parent can work while the child does."""
        self._posted += 1
        self._send(header, payloads)

    def _send(self, header: dict[str, Any], payloads: list[bytes] | None = None) -> None:
        try:
            channel.send(self._to_child, header, payloads)
        except OSError as exc:  # BrokenPipeError among them: the child is gone
            raise self._died() from exc

    def reply(self, deadline: float) -> tuple[dict[str, Any], list[bytes]]:
        """The child's authenticated reply to the command posted last."""
        return self._recv(deadline, expect_nonce=True)

    def _recv(self, deadline: float, expect_nonce: bool) -> tuple[dict[str, Any], list[bytes]]:
        try:
            header, payloads = channel.recv(self._from_child, deadline)
        except channel.ChannelTimeout as exc:
            self.kill()
            raise ChildTimedOut() from exc
        except channel.ChannelClosed as exc:
            raise self._died() from exc
        if expect_nonce:
            self._seq += 1
            if header.get("nonce") != self.nonce or header.get("seq") != self._seq:
                self.kill()
                raise channel.ProtocolError("message without the evaluation's nonce or out of sequence")
        return header, payloads

    def _died(self) -> ChildDied:
        """Why the child is gone, once it is: its channel closed. Every wait is bounded, so that an evaluation
        never hangs on a status that does not come (a CUDA child's teardown on a loaded host, a busy zygote)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                return ChildDied(self._violation or "closed its channel and did not exit within 15 s (killed)")
        if self._violation:
            return ChildDied(self._violation)
        if code < 0:
            name = signal.Signals(-code).name
            return ChildDied(f"killed by {name}", signal_name=name)
        return ChildDied(f"exited with status {code} without sending a result", status=code)

    def kill(self) -> None:
        """Kill the child and every process below it, those that left its session included (procfs.kill_tree)."""
        procfs.kill_tree(self.proc.pid)

    def needed_now(self) -> None:
        """An evaluation took this child before it was ready and waits for it: a GPU child still waiting for a gap
        between measurements (its evaluation may itself hold the device's `.want`) starts at once."""
        if not self._ready:
            with contextlib.suppress(OSError):
                Path(self.tmpdir, NEEDED_NOW).touch()

    def descendants(self) -> list[int]:
        """The live processes below the child, in its session or not."""
        return procfs.tree(self.proc.pid)[1:]

    def threads(self) -> set[int]:
        return thread_ids(self.proc.pid)

    def output_tail(self, limit: int = 2000) -> str:
        """What the child printed: informational only, never parsed for results."""
        parts = []
        for name in (".stdout", ".stderr"):
            try:
                data = Path(self.tmpdir, name).read_bytes()
            except OSError:
                continue
            if data:
                parts.append(data[-limit:].decode(errors="replace"))
        return "\n".join(parts)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.closed_at = time.monotonic()
        self.kill()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        # A killed CUDA process takes about a second to tear its context down: waited for off this thread.
        _SUPERVISOR.reap(self)

    def enforce_limits(self, pids: list[int], locks: dict[int, set[tuple[int, int, int]]]) -> None:
        """From the supervisor: kill the child when its processes (`pids`: it and everything below it) are over
        the memory or process limit, or hold a lock on a file of the device's timing slot (`locks`: the files each
        process of the host holds a `flock` on)."""
        limit_mb = self.settings.memory_limit_mb
        rss = sum(_rss_mb(p) for p in pids)
        held = {f for p in pids for f in locks.get(p, ())}
        if rss > limit_mb:
            self._violation = f"host memory limit exceeded ({rss:.0f} MB > {limit_mb} MB)"
        elif len(pids) > self.settings.max_processes:
            self._violation = f"process limit exceeded ({len(pids)} > {self.settings.max_processes})"
        elif held and self.settings.device_lock and held & lock_files(self.settings.device_lock):
            self._violation = "held a lock of the device's timing slot, which stops every evaluation on the device"
        if self._violation:
            self.kill()


class _Supervisor:
    """One thread per process that watches every live child from outside (host memory and process count of it
    and its descendants, one /proc pass per tick for all of them) and reaps closed ones (waits for the process to
    die, then removes its directory), so neither costs a thread per child nor holds up the evaluation."""

    TICK_S = 0.2

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """A fresh state; also in a forked process (a Celery pool process), whose parent's children and
        thread are not its own and whose lock may have been held at the fork."""
        self._watched: set[Child] = set()
        self._reaping: list[Child] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, child: Child) -> None:
        with self._lock:
            self._watched.add(child)
            self._start()

    def reap(self, child: Child) -> None:
        with self._lock:
            self._watched.discard(child)
            self._reaping.append(child)
            self._start()

    def drain(self, timeout: float = 15.0, remove: bool = False, every: bool = False) -> None:
        """Wait until the children this process closed are gone, those `awaited` or with `every` all: before a
        job that allocates GPU memory (a dying CUDA child still holds its own for ~0.1 s; a KernelBench
        reference holds tens of GB), and on shutdown, where `remove` also removes their directories (otherwise
        the next tick does, off the evaluation's path)."""
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            with self._lock:
                if all(c.proc.poll() is not None for c in self._reaping if every or c.awaited):
                    break
            time.sleep(0.01)
        if remove:
            self._remove_gone()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="kg-child-supervisor", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # a process vanishing mid-pass; the next tick looks again
                self._tick()
            time.sleep(self.TICK_S)

    def _tick(self) -> None:
        with self._lock:
            watched = [c for c in self._watched if not c._closed]
        alive = [c for c in watched if c.proc.poll() is None]
        if alive:
            trees = procfs.trees({c.proc.pid for c in alive})
            locks = procfs.flock_holders()
            for child in alive:
                child.enforce_limits(trees[child.proc.pid], locks)
        with self._lock:
            self._watched -= set(watched) - set(alive)
        self._remove_gone()

    def _remove_gone(self) -> None:
        with self._lock:
            gone = [c for c in self._reaping if c.proc.poll() is not None]
            self._reaping = [c for c in self._reaping if c not in gone]
        for child in gone:
            shutil.rmtree(child.tmpdir, ignore_errors=True)
            if child.device == "cuda":
                _CHILD_EVENTS.append(("end", child.closed_at, time.monotonic()))


_SUPERVISOR = _Supervisor()
os.register_at_fork(after_in_child=_SUPERVISOR._reset)

# When this process's GPU children started (spawned until ready: their context and the device warm-up) and ended
# (closed until seen gone, to a supervisor tick: their context torn down, their memory given back), in monotonic
# seconds, the timing slot's clock: the driver work beside a measurement that a bench sets against slow placements.
_CHILD_EVENTS: deque[tuple[str, float, float]] = deque(maxlen=1024)
os.register_at_fork(after_in_child=_CHILD_EVENTS.clear)


def _working(began: float, ready: float, header: dict[str, Any]) -> list[tuple[float, float]]:
    """A GPU child's start from spawn to ready, less the gaps between measurements it waited for (`Ready.waits`;
    malformed ones are ignored: the start then counts whole)."""
    spans, at = [], began
    try:
        waits = sorted((float(a), float(b)) for a, b in header.get("waits") or [])
    except (TypeError, ValueError):
        waits = []
    for a, b in waits:
        if at < a:
            spans.append((at, min(a, ready)))
        at = max(at, b)
    if at < ready:
        spans.append((at, ready))
    return spans


def take_child_events() -> list[tuple[str, float, float]]:
    """The GPU children's starts and ends recorded since the last call, as (kind, from, until), oldest first."""
    return [_CHILD_EVENTS.popleft() for _ in range(len(_CHILD_EVENTS))]


def drain_closed_children(every: bool, timeout: float = 15.0) -> None:
    """Wait until the children this process closed are gone: those a next job would wait for (`awaited`), or
    with `every` all of them, whatever they held."""
    _SUPERVISOR.drain(timeout, every=every)


class _DriverSeed:
    """Triton's driver module (a C extension that a process builds into its Triton cache with the C compiler on
    first use: a second or more of CPU), built once by a GPU child's warm-up and planted in the private cache of
    each later GPU or compiler child before it starts. It is taken only from a child that has said it is ready
    and has had no job: no user code has run in it. Per process; a forked process starts without one."""

    LIMIT_BYTES = 64 << 20

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.path: str | None = None

    def take(self, cache: str) -> None:
        with self._lock:
            if self.path is not None:
                return
            path = tempfile.mkdtemp(prefix="kernelgym-seed-")
            if copy_cache(cache, path, self.LIMIT_BYTES):
                self.path = path
                atexit.register(_remove_in, os.getpid(), path)
            else:
                shutil.rmtree(path, ignore_errors=True)

    def plant(self, cache: str) -> None:
        if self.path is not None:
            copy_cache(self.path, cache, self.LIMIT_BYTES)

    def add(self, cache: str) -> int:
        """The entries of a cache built by trusted code (services.launchers) added to the seed; files copied."""
        with self._lock:
            return copy_cache(cache, self.path, self.LIMIT_BYTES) if self.path is not None else 0

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self.path = None


def _remove_in(pid: int, path: str) -> None:
    """Remove `path` at exit of process `pid` only: a process forked from it inherits the exit hook, not the seed."""
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)


_SEED = _DriverSeed()
os.register_at_fork(after_in_child=_SEED._reset)
LAUNCHERS = LauncherBuilds(_SEED)
os.register_at_fork(after_in_child=LAUNCHERS._reset)


class ChildPool:
    """Keeps `size` children per device started and ready (torch imported, device initialised), so that taking
    one never waits for a start; each is handed out once. Each time one is wanted and none is ready, one more is
    kept for that device, up to `warm_children_max`.

    A background thread starts a replacement as soon as a child is taken, so a start never runs inside the
    evaluation that uses the child. Only when no spare is ready does `acquire` hand out the oldest one still
    starting (the caller's `start_job` then waits for it) or, with none at all, start one there and then.
    """

    def __init__(self, settings: EvalSettings, size: int | None = None):
        procfs.undumpable()  # what the children's evaluations hold, the children of the same user must not read
        self.settings = settings
        self.size = settings.warm_children if size is None else size
        self._most = max(self.size, settings.warm_children_max) if self.size else 0
        self._sizes: dict[str, int] = {}  # per device: grown from `size` while children run out
        self._ready: dict[str, deque[Child]] = {}
        self._starting: dict[str, deque[tuple[Child, float]]] = {}  # with when each was started
        self._lock = threading.Lock()
        self._closed = False
        # Per device, children that failed to start in a row, and until when its refill backs off: a device
        # whose children fail (a compiler child the host cannot isolate) holds up no other device's refill.
        self._failures: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}
        self._wake_r, self._wake_w = os.pipe()
        self._warmer: threading.Thread | None = None

    def acquire(self, device: str) -> Child:
        with self._lock:
            warmed = self._register(device)  # a first child of a device was never a spare to run out of
            ready, starting = self._ready[device], self._starting[device]
            child = None
            while ready and child is None:
                child = ready.popleft()
                if child.proc.poll() is not None:
                    child.close()
                    child = None
            if child is None and warmed:
                self._sizes[device] = min(self._sizes[device] + 1, self._most)
            if child is None and starting:
                child, _ = starting.popleft()
        self._wake()
        child = child or Child(device, self.settings)
        child.needed_now()
        return child

    def prewarm(self, device: str) -> None:
        """Start filling the pool for `device` in the background; returns at once."""
        with self._lock:
            self._register(device)
        self._wake()

    def _register(self, device: str) -> bool:
        """Under the lock: the pool's entries for `device`; whether it had them already."""
        known = device in self._ready
        if not known:
            self._ready[device], self._starting[device], self._sizes[device] = deque(), deque(), self.size
        return known

    def ready(self, device: str) -> int:
        """Children of `device` ready to be handed out now."""
        with self._lock:
            return len(self._ready.get(device, ()))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            children = [*(c for q in self._ready.values() for c in q)]
            children += [c for q in self._starting.values() for c, _ in q]
            self._ready.clear()
            self._starting.clear()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._warmer is not None and self._warmer is not threading.current_thread():
            self._warmer.join(timeout=10)
        for child in children:
            child.close()
        _SUPERVISOR.drain(remove=True, every=True)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- the refill thread -------------------------------------------------------------------------
    def _wake(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self._warmer is None or not self._warmer.is_alive():
                self._warmer = threading.Thread(target=self._refill, name="kg-child-pool", daemon=True)
                self._warmer.start()
            os.write(self._wake_w, b"x")

    def _refill(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                missing = {
                    d: self._sizes[d] - len(self._ready[d]) - len(self._starting[d])
                    for d in self._ready
                    if now >= self._retry_at.get(d, 0.0)
                }
                waiting = [entry for q in self._starting.values() for entry in q]
            for device, n in missing.items():
                for _ in range(n):
                    self._start(device)
            fds = {child._from_child: child for child, _ in waiting}
            readable, _, _ = select.select([self._wake_r, *fds], [], [], 1.0)
            if self._wake_r in readable:
                os.read(self._wake_r, 4096)
            for fd in readable:
                if fd in fds:
                    self._settle(fds[fd])
            for child, since in waiting:
                if time.monotonic() - since > self.settings.child_start_timeout_s and self._take_starting(child):
                    self._failed(child)

    def _start(self, device: str) -> None:
        child = Child(device, self.settings)
        with self._lock:
            if not self._closed:
                self._starting[device].append((child, time.monotonic()))
                return
        child.close()

    def _take_starting(self, child: Child) -> bool:
        """Remove a starting child from the pool; False when `acquire` handed it out meanwhile."""
        with self._lock:
            starting = self._starting.get(child.device, deque())
            for entry in starting:
                if entry[0] is child:
                    starting.remove(entry)
                    return True
        return False

    def _settle(self, child: Child) -> None:
        """A starting child spoke or died: it joins the ready ones, or is closed."""
        if not self._take_starting(child):
            return
        try:
            child.wait_ready(time.monotonic() + 5.0)
        except (ChildDied, ChildTimedOut, channel.ProtocolError):
            self._failed(child)
            return
        with self._lock:
            self._failures.pop(child.device, None)
            if not self._closed:
                self._ready[child.device].append(child)
                return
        child.close()

    def _failed(self, child: Child) -> None:
        child.close()
        with self._lock:
            n = self._failures[child.device] = self._failures.get(child.device, 0) + 1
            self._retry_at[child.device] = time.monotonic() + min(30.0, 0.5 * 2**n)
