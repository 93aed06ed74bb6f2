"""The per-GPU timing slot: one evaluation at a time measures on a device, and nothing else runs on it meanwhile.

Several evaluations share a GPU (the worker's pool processes, or several workers pinned to it), and their CPU-bound
stages overlap. A timing stage needs the device to itself: another evaluation's correctness trials
on the same GPU time-slice with the timed kernels, which on an H100 stretched the timing stage's median hold from
0.5 s to 1 s, sent adaptive sampling to its cap, and moved speedups by up to 10%. So the device has a
reader-writer lock with writer preference, made of `flock`s on three files named after the device (a GPU's
UUID: `KERNELGYM_WORKER_DEVICE_ID`), shared by every process on the host that opens the same directory:

- `<device>.want`: every evaluation waiting to measure or measuring holds it shared; while anyone does, no
  new GPU work starts (a request is admitted only by taking it exclusively for a moment);
- `<device>.lock`: the slot itself, taken exclusively by the one evaluation about to measure;
- `<device>.use`: GPU work outside measurements (a request to a child: load, compile, correctness, checks)
  holds it shared; the measuring evaluation takes it exclusively once the requests in flight have ended.

Memory is shared, in units: the device's memory is `MEMORY_UNITS` equal parts, each a file `<device>.mem/<i>`,
and an evaluation holds as many exclusively, from its first request to its end, as its problem needs (`occupy`);
one that needs them all has the device to itself. Its units are taken under `<device>.door`, held exclusively while
it waits for them, so that new evaluations queue behind it instead of starving it. How many units a problem needs is
the evaluator's estimate (services.device_memory): a problem whose tensors could not share the device with others'
waits for room before it starts, rather than running out of memory beside them and starting again.

A measurement waits for every request in flight (the device idles meanwhile), so what holds `.use` should be GPU
work: a child creating its CUDA context (seconds under load) does it outside. The profiler
(services.parent.profile) is such a request, not a measurement: its coverage figure is a ratio of its own kernels'
times. Measurements that queue up run back to back and pay that wait once: no request starts from the first one's
wait to the last one's end, since each holds `.want` until it is done. Requests wait out such a run of
measurements, but only the evaluations already past their requests are in it. So that more are, a measurement first
lets requests run on for `gather_s` (EvalSettings.device_lock_gather_s) unless the device is idle or another
measurement has already stopped them: on a replay of an H100 worker's durations (bench/slot_schedule.py) that
raised evaluations per minute by about a quarter. The kernel releases every lock when its holder dies, however it
dies. Only the harness's own processes may hold one: a child (a candidate's or a reference's code) can open these
files, read-only too, and a `flock` it held would stop every evaluation on the device, its own included, whose
waits for the slot do not count against any limit; each process's supervisor kills a child that holds a lock on
any file of the lock directory (`lock_files`, services.sandbox). The evaluator makes its slot from
`EvalSettings.device_lock` (a worker sets it); a cancelled evaluation stops waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from services import procfs
from services.errors import EvaluationCancelled

# How often a waiting evaluation retries a lock (and looks for a cancellation): small against the seconds a
# holder keeps the slot, so the device idles at most this long between two holders.
_POLL_S = 0.002
# Parts of the device's memory an evaluation holds: small enough that a problem's share is close to its need
# (an H100's unit is 2.5 GB), few enough that taking them all is quick.
MEMORY_UNITS = 32


class TimingSlot:
    """`with slot(): ...` holds the device to measure; `with slot.shared(): ...` runs other GPU work beside other
    evaluations' (a no-op inside this process's own `slot()`). One per process; neither is re-entrant."""

    def __init__(self, path: Path, gather_s: float = 0.0):
        self.path = path
        self.gather_s = gather_s
        self.want = want_file(path)
        self.use = path.with_suffix(".use")
        self.units = path.with_suffix(".mem")
        self.door = path.with_suffix(".door")
        self.units.mkdir(parents=True, exist_ok=True)
        self._cancelled = threading.Event()
        self._measuring = False
        # By the current evaluation in this process: waiting for the slot (`drained_s`: the part of the wait spent
        # for other evaluations' requests in flight to end, the device idle) and waiting to run GPU work.
        self.waited_s = self.drained_s = self.shared_waited_s = 0.0
        self.memory_waited_s = 0.0  # waiting for memory units (`occupy`)
        # When it held the device (monotonic seconds, one clock for every process of the host): its measurements
        # ("measurement") and its requests (what each was), so that a bench can tell how much of the time some
        # evaluation's GPU work held the device and how much it was free.
        self.busy: list[tuple[float, float, str]] = []

    def reset(self) -> None:
        """A new evaluation starts: forget an earlier cancellation and the last figures."""
        self._cancelled.clear()
        self.waited_s = self.drained_s = self.shared_waited_s = self.memory_waited_s = 0.0
        self.busy = []

    @property
    def held_s(self) -> float:
        """Seconds the current evaluation held the slot to measure."""
        return sum(b - a for a, b, what in self.busy if what == "measurement")

    @property
    def longest_shared(self) -> tuple[float, str]:
        """The current evaluation's longest request outside a measurement, and what it was: what every
        measurement on the device may have had to wait for."""
        return max(((b - a, what) for a, b, what in self.busy if what != "measurement"), default=(0.0, ""))

    def cancel(self) -> None:
        """From another thread: a wait in progress (or the next one) raises EvaluationCancelled."""
        self._cancelled.set()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        t0 = time.monotonic()
        self._gather(t0 + self.gather_s)
        with self._locked(self.want, fcntl.LOCK_SH), self._locked(self.path, fcntl.LOCK_EX):
            turn = time.monotonic()  # the measurements queued before this one are done
            with self._locked(self.use, fcntl.LOCK_EX):
                t1 = time.monotonic()
                self.waited_s += t1 - t0
                self.drained_s += t1 - turn
                self._measuring = True
                try:
                    yield
                finally:
                    self._measuring = False
                    self.busy.append((t1, time.monotonic(), "measurement"))

    @contextlib.contextmanager
    def shared(self, what: str = "") -> Iterator[None]:
        """GPU work beside other evaluations' (`what` names it in `busy`)."""
        if self._measuring:
            yield
            return
        t0 = time.monotonic()
        held = None
        use = self._open(self.use)
        try:
            # Admitted only while nobody waits to measure: `.want` taken exclusively for a moment. Nobody then
            # holds `.use` exclusively, and nobody can start to wait until the shared hold is taken.
            with self._locked(self.want, fcntl.LOCK_EX):
                fcntl.flock(use, fcntl.LOCK_SH)
            held = time.monotonic()
            self.shared_waited_s += held - t0
            yield
        finally:
            os.close(use)  # releases the lock
            if held is not None:
                self.busy.append((held, time.monotonic(), what or "request"))

    @contextlib.contextmanager
    def occupy(self, units: int) -> Iterator[HeldUnits]:
        """One evaluation's stay on the device with `units` of its memory (all of them: the device to itself);
        waits while they are held by others, and new evaluations wait behind it. What it yields gives units back
        early, where the rest of the evaluation needs fewer."""
        units = min(max(units, 1), MEMORY_UNITS)
        t0 = time.monotonic()
        held: dict[int, int] = {}  # unit -> the descriptor holding it
        try:
            with self._locked(self.door, fcntl.LOCK_EX):
                while not self._take_units(held, units):
                    if self._cancelled.is_set():
                        raise EvaluationCancelled("cancelled while waiting for the device's memory")
                    time.sleep(_POLL_S)
            self.memory_waited_s += time.monotonic() - t0
            yield HeldUnits(held)
        finally:
            for fd in held.values():
                os.close(fd)  # releases the lock

    def _take_units(self, held: dict[int, int], units: int) -> bool:
        """Lock free units into `held` until it has `units`; whether it has."""
        for i in range(MEMORY_UNITS):
            if len(held) == units:
                break
            if i not in held:
                fd = self._open(self.units / str(i))
                if _try_lock(fd, fcntl.LOCK_EX):
                    held[i] = fd
                else:
                    os.close(fd)
        return len(held) == units

    def _gather(self, until: float) -> None:
        """Before stopping other evaluations' requests: let them run on until the device is idle, another
        measurement has stopped them (this one then queues behind it), or `until`. Measurements that arrive
        meanwhile gather into one run, which waits for the device to drain once."""
        slot, use = self._open(self.path), self._open(self.use)
        try:
            while time.monotonic() < until:
                if self._cancelled.is_set():
                    raise EvaluationCancelled("cancelled while waiting for the device's timing slot")
                if not _try_lock(slot, fcntl.LOCK_EX):  # a measurement holds the slot or waits for the drain
                    return
                fcntl.flock(slot, fcntl.LOCK_UN)
                if _try_lock(use, fcntl.LOCK_EX):  # nothing in flight: no reason to wait
                    return
                time.sleep(_POLL_S)
        finally:
            os.close(slot)
            os.close(use)

    def _open(self, path: Path) -> int:
        # Opened per use and close-on-exec (Python's default): no child process ever holds a lock.
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    @contextlib.contextmanager
    def _locked(self, path: Path, mode: int) -> Iterator[None]:
        fd = self._open(path)
        try:
            while True:
                if self._cancelled.is_set():
                    raise EvaluationCancelled("cancelled while waiting for the device's timing slot")
                if _try_lock(fd, mode):
                    break
                time.sleep(_POLL_S)
            yield
        finally:
            os.close(fd)


class HeldUnits:
    """The memory units one evaluation holds (`TimingSlot.occupy`)."""

    def __init__(self, held: dict[int, int]):
        self._held = held

    def __len__(self) -> int:
        return len(self._held)

    def keep(self, units: int) -> None:
        """Give back all but `units` of them (at least one is kept), for other evaluations to take."""
        for unit in sorted(self._held)[max(units, 1) :]:
            os.close(self._held.pop(unit))  # releases the lock


def _try_lock(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def want_file(device_lock: str | Path) -> Path:
    """The file every evaluation waiting to measure or measuring holds shared (`TimingSlot.want`)."""
    return Path(device_lock).with_suffix(".want")


def lock_files(device_lock: str) -> set[tuple[int, int, int]]:
    """The files of the directory that holds `device_lock` and of its memory units' folders (every device's slot,
    units and markers on the host), as (major, minor, inode): what no child may hold a lock on. Nothing deeper: a
    child's own directory may lie below a lock directory set to /tmp, and its own locks there are its business."""
    folder = os.path.dirname(device_lock)
    paths = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False) and entry.name.endswith(".mem"):
                with contextlib.suppress(OSError):
                    paths += [unit.path for unit in os.scandir(entry.path)]
            else:
                paths.append(entry.path)
    found = set()
    for path in paths:
        with contextlib.suppress(OSError):  # removed meanwhile
            found.add(procfs.file_id(path))
    return found


def wait_between_measurements(want: str, most_s: float, needed: str | None = None) -> float:
    """Wait until no evaluation waits to measure or measures on the device (nobody holds its `.want` file, as
    /proc/locks shows: no lock is taken), at most `most_s`, or until the file `needed` exists; returns the seconds
    waited. For work that would slow a measurement beside it but need not hold the device: a child's start (its
    context, its device warm-up), which an evaluation that takes the child ends (its `.want` may be one held)."""
    began = time.monotonic()
    try:
        target = procfs.file_id(want)
    except OSError:
        return 0.0  # nothing has waited for the device yet
    while (
        time.monotonic() - began < most_s
        and not (needed and os.path.exists(needed))
        and any(target in files for files in procfs.flock_holders().values())
    ):
        time.sleep(5 * _POLL_S)
    return time.monotonic() - began
