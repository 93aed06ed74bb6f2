"""Warm children that never run out: spares start in the background and are handed out ready, so back-to-back
evaluations spend no time starting children."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import pytest
from helpers import bundled_source

from services import sandbox
from services.errors import ChildDied, ChildTimedOut
from services.evaluator import Evaluator
from services.protocol.channel import ProtocolError
from services.sandbox import Child, ChildPool
from services.schema import EvalOptions
from services.settings import EvalSettings

RELU = "level1/1_ReLU"


def wait_ready(pool: ChildPool, n: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while pool.ready("cpu") < n:
        assert time.monotonic() < deadline, f"{pool.ready('cpu')}/{n} children ready"
        time.sleep(0.1)


def test_spares_are_started_in_the_background_and_handed_out_ready():
    pool = ChildPool(EvalSettings(), size=2)
    try:
        t0 = time.monotonic()
        pool.prewarm("cpu")
        assert time.monotonic() - t0 < 0.5  # prewarm never waits for a start
        wait_ready(pool, 2)
        t0 = time.monotonic()
        child = pool.acquire("cpu")
        child.wait_ready(time.monotonic() + 0.1)  # already ready: no wait, or ChildTimedOut
        assert time.monotonic() - t0 < 0.1
        wait_ready(pool, 2)  # the one taken is replaced without another acquire
        child.close()
        # A spare that dies is not handed out.
        dead = pool.acquire("cpu")
        wait_ready(pool, 2)
        dead.close()
        for spare in list(pool._ready["cpu"]):
            spare.kill()
            spare.proc.wait()
        alive = pool.acquire("cpu")
        assert alive.proc.poll() is None
        alive.close()
    finally:
        pool.close()


def test_a_pool_that_runs_out_keeps_more_children_up_to_its_ceiling():
    """Children used faster than they start: every acquire that finds none ready keeps one more, up to
    `warm_children_max`; a pool of none stays off."""
    pool = ChildPool(EvalSettings(warm_children=1, warm_children_max=2))
    taken = []
    try:
        pool.prewarm("cpu")
        wait_ready(pool, 1)
        taken += [pool.acquire("cpu") for _ in range(3)]  # the spare, then two that were not ready
        wait_ready(pool, 2)
        time.sleep(0.5)
        assert pool.ready("cpu") + len(pool._starting["cpu"]) == 2
    finally:
        for child in taken:
            child.close()
        pool.close()
    off = ChildPool(EvalSettings(warm_children=0))
    off.prewarm("cpu")
    off.acquire("cpu").close()
    time.sleep(0.3)
    assert off.ready("cpu") == 0 and not off._starting["cpu"]
    off.close()


def test_a_child_taken_before_it_is_ready_is_told_it_is_needed_now():
    """So that a GPU child waiting for a gap between measurements starts at once (services.device_lock)."""
    from services.protocol.messages import NEEDED_NOW

    pool = ChildPool(EvalSettings(warm_children=1))
    taken = []
    try:
        pool.prewarm("cpu")
        wait_ready(pool, 1)
        taken += [pool.acquire("cpu") for _ in range(2)]  # the spare, then one not yet ready
        needed = [os.path.exists(os.path.join(c.tmpdir, NEEDED_NOW)) for c in taken]
        assert needed == [False, True]
    finally:
        for child in taken:
            child.close()
        pool.close()


def test_evaluations_take_ready_children_instead_of_waiting_for_a_start(relu):
    """Bursts of as many back-to-back evaluations as the spares cover, the pool refilling between bursts. How
    fast it refills is the host's (a child start is seconds of CPU: two per evaluation); on this CI box of two
    cores that is slower than an evaluation, on a GPU host bench/service_throughput.py reports `start`. Taking
    a ready child is bookkeeping, 0.1 s at most on an idle box; the bound leaves room for a loaded one (0.12 s
    seen at the end of a full run), far below the seconds of waiting for a start."""
    options = EvalOptions(device="cpu", timing=False)
    starts = []
    with Evaluator(EvalSettings(correctness_trials=1, warm_children=4)) as ev:
        for _ in range(2):
            ev.pool.prewarm("cpu")
            wait_ready(ev.pool, 4)
            for _ in range(2):
                result = ev.evaluate(relu, bundled_source(RELU), options).result
                assert result.verdict.value == "passed"
                starts.append(result.phases["start"])
    assert max(starts) <= 0.5, starts


def test_a_child_that_speaks_another_protocol_version_is_refused(monkeypatch):
    # As a parent of the next protocol version would see this install's child.
    monkeypatch.setattr(sandbox, "PROTOCOL_VERSION", "kernelgym-eval/999")
    child = Child("cpu", EvalSettings())
    try:
        with pytest.raises(ProtocolError, match="kernelgym-eval/999"):
            child.wait_ready(time.monotonic() + 120)
    finally:
        child.close()


def test_a_child_not_ready_in_time_is_reported_with_its_last_step_and_the_hosts_load():
    # On a 2-GPU H100 host with four 8-process workers, every child ran past its 120 s start limit and the
    # error said nothing more: the step it was on and the host's load are what tell why. Started as a command: a
    # child forked from the zygote is ready sooner than any deadline this test could rely on.
    child = Child("cpu", EvalSettings(fork_children=False))
    try:
        with pytest.raises(ChildTimedOut, match=r"not ready \d+ s after it was started, at: \w.* host load average"):
            child.wait_ready(time.monotonic() + 0.3)
    finally:
        child.close()


def test_a_ready_child_that_dies_before_its_job_is_a_dead_child_not_a_crash_of_the_worker():
    # On a GPU host, children killed under an evaluation about to give them their job raised BrokenPipeError out
    # of the evaluator; a dead child is the machine's fault, which the evaluation reports as such.
    child = Child("cpu", EvalSettings())
    try:
        child.wait_ready(time.monotonic() + 120)
        child.kill()
        child.proc.wait(timeout=30)
        with pytest.raises(ChildDied, match="killed by SIGKILL"):
            child.start_job({"nonce": "n"}, time.monotonic() + 5)
    finally:
        child.close()


def test_a_device_whose_children_fail_to_start_holds_up_no_other_devices_refill(monkeypatch):
    # The refill backs off after children fail to start; a compiler child that a host cannot isolate kept
    # backing off the GPU children's refill too, when the back-off was the pool's.
    spawn = Child._spawn

    def spawn_or_fail(self: Child, device: str, *args: object) -> subprocess.Popen:
        if device == "broken":
            return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        return spawn(self, device, *args)

    monkeypatch.setattr(Child, "_spawn", spawn_or_fail)
    pool = ChildPool(EvalSettings(), size=1)
    try:
        pool.prewarm("cpu")
        wait_ready(pool, 1)
        pool.prewarm("broken")
        deadline = time.monotonic() + 60
        while pool._failures.get("broken", 0) < 3:  # backing off 4 s now
            assert time.monotonic() < deadline, pool._failures
            time.sleep(0.05)
        pool.acquire("cpu").close()
        taken = time.monotonic()
        while not pool._starting["cpu"] and not pool.ready("cpu"):
            assert time.monotonic() - taken < 1.0, "the cpu refill waited for the broken device's back-off"
            time.sleep(0.01)
        assert pool._retry_at["broken"] > taken and "cpu" not in pool._retry_at
    finally:
        pool.close()


def test_closing_a_child_returns_at_once_and_one_thread_reaps_it_and_watches_every_child():
    """A killed CUDA child takes about a second to die: the evaluation does not wait for it. One supervisor
    thread per process watches every child's limits and removes a closed child's directory once it is gone."""
    children = [Child("cpu", EvalSettings())]
    threads = threading.active_count()  # the supervisor runs from the first child on
    children += [Child("cpu", EvalSettings()) for _ in range(2)]
    assert threading.active_count() == threads
    try:
        for child in children:
            child.wait_ready(time.monotonic() + 120)
        t0 = time.monotonic()
        children[0].close()
        assert time.monotonic() - t0 < 0.5
        deadline = time.monotonic() + 15
        while children[0].proc.poll() is None or os.path.exists(children[0].tmpdir):
            assert time.monotonic() < deadline, "the closed child was not reaped"
            time.sleep(0.05)
        assert all(c.proc.poll() is None for c in children[1:])
    finally:
        for child in children:
            child.close()


def test_tritons_driver_module_is_taken_once_from_a_fresh_child_and_planted_in_later_ones(tmp_path):
    seed = sandbox._DriverSeed()
    seed.take(str(tmp_path / "empty"))  # a child with nothing built gives no seed
    assert seed.path is None
    for name, content in (("first", b"built by the first child"), ("second", b"another child's")):
        (tmp_path / name / "key").mkdir(parents=True)
        (tmp_path / name / "key" / "cuda_utils.so").write_bytes(content)
        seed.take(str(tmp_path / name))
    seed.plant(str(tmp_path / "new"))
    assert (tmp_path / "new" / "key" / "cuda_utils.so").read_bytes() == b"built by the first child"


def test_the_seed_is_removed_at_exit_only_by_the_process_that_took_it(tmp_path):
    # A worker's pool processes are forked after the seed may have been taken: they inherit the exit hook.
    sandbox._remove_in(os.getpid() + 1, str(tmp_path))
    assert tmp_path.exists()
    sandbox._remove_in(os.getpid(), str(tmp_path))
    assert not tmp_path.exists()


@dataclass(eq=False)
class ClosedChild:
    """What the supervisor reads of a closed child."""

    proc: subprocess.Popen
    awaited: bool
    tmpdir: str
    _closed: bool = True


def test_a_start_waits_only_for_closed_children_that_may_hold_memory_the_job_needs(tmp_path):
    """A killed CUDA child holds its device memory for ~0.1 s while it dies; the next start waits for it only
    where it held large tensors (`awaited`), and a drain of `every` child waits for all, whatever they held."""
    supervisor = sandbox._Supervisor()
    dying = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a child slow to die
    child = ClosedChild(dying, awaited=False, tmpdir=str(tmp_path / "child"))
    try:
        supervisor.reap(child)
        t0 = time.monotonic()
        supervisor.drain(timeout=5)
        assert time.monotonic() - t0 < 0.5  # light: not waited for
        threading.Timer(0.5, dying.kill).start()
        t0 = time.monotonic()
        supervisor.drain(timeout=5, every=True)
        assert 0.4 < time.monotonic() - t0 < 4 and dying.poll() is not None
    finally:
        dying.kill()
        dying.wait()
    heavy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        supervisor.reap(ClosedChild(heavy, awaited=True, tmpdir=str(tmp_path / "heavy")))
        threading.Timer(0.5, heavy.kill).start()
        t0 = time.monotonic()
        supervisor.drain(timeout=5)
        assert 0.4 < time.monotonic() - t0 < 4  # awaited: the start waits until it is gone
    finally:
        heavy.kill()
        heavy.wait()
