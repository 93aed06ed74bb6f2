"""The per-device timing slot: exclusive across processes, freed by the kernel when its holder dies, and given
up by a cancelled wait."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from gym_worker.slot import TimingSlot
from services.errors import EvaluationCancelled

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def holder(path) -> subprocess.Popen:
    """Another process that takes the slot and keeps it until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_killed_holder_frees_the_slot(tmp_path):
    slot = TimingSlot(tmp_path / "gpu-x.lock")
    other = holder(slot.path)
    got = threading.Event()

    def take() -> None:
        with slot():
            got.set()

    waiter = threading.Thread(target=take)
    waiter.start()
    assert not got.wait(1.0)  # held by the other process
    other.kill()  # SIGKILL: the kernel releases its lock
    other.wait()
    assert got.wait(5.0)
    waiter.join()
    assert slot.waited_s >= 1.0


def test_two_holders_never_overlap(tmp_path):
    slots = [TimingSlot(tmp_path / "gpu-x.lock") for _ in range(2)]  # two lock users, as two processes have
    inside: list[int] = []
    overlaps: list[int] = []

    def use(slot: TimingSlot) -> None:
        for _ in range(20):
            with slot():
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.002)
                inside.pop()

    threads = [threading.Thread(target=use, args=(s,)) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps


def test_a_cancelled_wait_gives_up_and_a_reset_slot_works_again(tmp_path):
    slot = TimingSlot(tmp_path / "gpu-x.lock")
    other = holder(slot.path)
    try:
        threading.Timer(0.3, slot.cancel).start()
        t0 = time.monotonic()
        with pytest.raises(EvaluationCancelled), slot():
            pass
        assert time.monotonic() - t0 < 2.0
    finally:
        other.kill()
        other.wait()
    slot.reset()
    with slot():
        pass
    assert slot.held_s >= 0.0 and slot.waited_s < 1.0
