"""The exclusive per-GPU timing slot: one evaluation at a time measures on a device, whichever process runs it.

Several evaluations share a GPU (the worker's pool processes, or several workers pinned to it), and their CPU-bound
stages overlap; only timing and profiling must see the device to themselves. The slot is an `flock` on a file
named after the device (a GPU's UUID: `KERNELGYM_WORKER_DEVICE_ID`), so it is shared by every process on the host
that opens the same directory, and the kernel releases it when its holder dies, however it dies. The evaluation
core holds it through `Evaluator(timing_slot=...)`; a cancelled evaluation stops waiting for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from services.errors import EvaluationCancelled

# How often a waiting evaluation retries the lock (and looks for a cancellation): small against the
# seconds a holder keeps the slot, so the device idles at most this long between two holders.
_POLL_S = 0.005


class TimingSlot:
    """A context-manager factory: `with slot(): ...` holds the device's slot. One per process; not re-entrant."""

    def __init__(self, path: Path):
        self.path = path
        self._cancelled = threading.Event()
        self.waited_s = 0.0  # by the last holder in this process: how long it waited, how long it held
        self.held_s = 0.0

    def reset(self) -> None:
        """A new evaluation starts: forget an earlier cancellation and the last figures."""
        self._cancelled.clear()
        self.waited_s = self.held_s = 0.0

    def cancel(self) -> None:
        """From another thread: a wait in progress (or the next one) raises EvaluationCancelled."""
        self._cancelled.set()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Opened per use and close-on-exec (Python's default): no child process ever holds the lock.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            t0 = time.monotonic()
            while True:
                if self._cancelled.is_set():
                    raise EvaluationCancelled("cancelled while waiting for the timing slot")
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(_POLL_S)
            t1 = time.monotonic()
            self.waited_s += t1 - t0
            try:
                yield
            finally:
                self.held_s += time.monotonic() - t1
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
