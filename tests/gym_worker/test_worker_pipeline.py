"""A worker with several evaluations in flight, against its own live stack: they overlap, their timing waits for
the device's slot, a cancelled or SIGKILLed holder frees it, each evaluation is reported exactly once, and a
quarantine set by any process on the device holds every pool process until a probe lifts it; the worker counts
once in /readyz and /metrics, its processes as evaluation slots."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest
import redis
from conftest import WORKER_ENV
from helpers import bundled_source, relu_candidate, unique
from test_service_faults import wait_until_running

from gym_client import Evaluation, KernelGymClient
from kernelgym.stack import LocalStack

RELU = "level1/1_ReLU"
# Fast through load and the first correctness calls, then 15 s per call: it holds the timing slot for minutes.
SLOW_LATER = unique(
    relu_candidate(
        "_calls.append(1)\nif len(_calls) > 4:\n    time.sleep(15)\nreturn triton_relu(x)",
        extra="import time\n_calls = []\n",
    )
)


@pytest.fixture
def pipelined(tmp_path):
    """Redis, a gateway and one worker with two evaluations in flight, its locks in a private directory."""
    locks = tmp_path / "locks"
    locks.mkdir()
    env = {**WORKER_ENV, "KERNELGYM_WORKER_CONCURRENCY": "2", "KERNELGYM_GPU_LOCK_DIR": str(locks)}
    with LocalStack(tmp_path / "stack", env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        stack.start_worker()
        stack.wait_ready(workers=2)
        stack.locks = locks
        yield stack


def slot_held(lock: Path) -> bool:
    """Whether some process holds the slot (taking it for an instant when free)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def slot_holder(lock: Path) -> int:
    """The process holding the slot, from the kernel's table of locks."""
    inode = os.stat(lock).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1] == "FLOCK" and int(fields[5].rsplit(":", 1)[1]) == inode:
            return int(fields[4])
    raise AssertionError("nobody holds the slot")


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def holder_and_waiter(gym: KernelGymClient, lock: Path) -> tuple[Evaluation, Evaluation]:
    """The slow candidate, once it holds the slot, and an honest one running alongside in the other process."""
    holder = gym.evaluate(SLOW_LATER, problem_id=RELU, wait=0)
    wait_for(lambda: slot_held(lock), 180, "the slow candidate never took the timing slot")
    waiter = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, wait=0)
    wait_until_running(gym, waiter.id)
    return holder, waiter


def test_a_cancelled_holder_frees_the_slot_the_other_evaluation_waits_for(pipelined):
    lock = pipelined.locks / "cpu.lock"
    with KernelGymClient(pipelined.base_url, timeout=30) as gym:
        holder, waiter = holder_and_waiter(gym, lock)
        time.sleep(30)  # far longer than it needs on its own, up to its timing
        assert gym.get(waiter.id).status == "running" and gym.get(holder.id).status == "running"
        gym.cancel(holder.id)
        assert gym.wait(holder.id, timeout=60).status == "cancelled"
        done = gym.wait(waiter.id, timeout=120)
        assert done.status == "done" and done.verdict == "passed"
    assert not slot_held(lock)
    # The worker logs (just after it reports the result) why the evaluation held the slot as long as it did.
    log = pipelined.dir / "worker0.log"

    def honest() -> list[dict]:
        finished = [json.loads(line) for line in log.read_text().splitlines() if '"evaluation finished"' in line]
        return [f for f in finished if not f["cancelled"]]

    wait_for(honest, 10, "the honest evaluation's figures were not logged")
    assert len(honest()) == 1 and honest()[0]["timed_calls"]["candidate"] >= 3
    assert honest()[0]["timings_from_cache"] == []  # the holder was cancelled before it could store the reference
    # What the device waited for: this evaluation's measurement, for requests in flight to end; and its own
    # longest request outside a measurement, named; and which problem it was.
    figures = honest()[0]
    assert figures["problem_id"] == RELU
    assert 0 <= figures["timing_slot_drain_s"] <= figures["timing_slot_wait_s"]
    assert figures["longest_gpu_request"]["s"] > 0 and figures["longest_gpu_request"]["what"]
    # And where its time went, by request: each timed call is one request (warm-up calls included).
    assert figures["requests"]["candidate.time"]["n"] >= figures["timed_calls"]["candidate"]
    assert figures["requests"]["reference.call"]["n"] >= 1 and figures["requests"]["candidate.call"]["s"] > 0
    # And its whole time in the evaluator, and storing its result: the phases leave out the worker's own part.
    assert figures["evaluate_s"] >= done.result["phases"]["total"] - 0.001 and figures["store_s"] >= 0  # ms rounding


def test_a_sigkilled_holder_frees_the_slot_and_each_evaluation_is_reported_once(pipelined):
    lock = pipelined.locks / "cpu.lock"
    with KernelGymClient(pipelined.base_url, timeout=30) as gym:
        holder, waiter = holder_and_waiter(gym, lock)
        os.kill(slot_holder(lock), signal.SIGKILL)  # the pool process running the slow candidate's timing
        # Cancelled as soon as it is redelivered: it cannot finish first (its second attempt needs over a minute), while
        # the honest one may have to wait for the slot that second attempt takes.
        wait_for(lambda: gym.get(holder.id).raw["attempts"] == 2, 60, "the killed evaluation was not redelivered")
        gym.cancel(holder.id)
        assert gym.wait(holder.id, timeout=60).status == "cancelled"
        done = gym.wait(waiter.id, timeout=120)
        assert done.status == "done" and done.verdict == "passed" and done.raw["attempts"] == 1
    time.sleep(1.0)
    verdicts = redis.Redis.from_url(pipelined.redis_url).hgetall("kg:stats:verdicts")
    assert verdicts == {b"passed": b"1"}  # recorded once; the killed delivery recorded nothing
    assert not slot_held(lock)


def test_a_quarantine_marked_by_any_process_holds_every_pool_process_until_a_probe_lifts_it(tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    env = {
        **WORKER_ENV,
        "KERNELGYM_WORKER_DEVICE": "cpu",  # a GPU-class worker evaluating on CPU, standing in for the device
        "KERNELGYM_WORKER_CONCURRENCY": "2",
        "KERNELGYM_GPU_LOCK_DIR": str(locks),
        "KERNELGYM_HEARTBEAT_S": "1",
        "KERNELGYM_QUARANTINE_PROBE_S": "20",
    }
    with LocalStack(tmp_path / "stack", device_class="h100", env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        stack.start_worker()
        stack.wait_ready(workers=2)
        r = redis.Redis.from_url(stack.redis_url)

        def beats() -> list[bytes]:
            return [r.hget(k, "quarantined") for k in r.scan_iter(match="kg:worker:*")]

        ready = httpx.get(stack.base_url + "/readyz").json()
        assert (ready["workers"], ready["evaluation_slots"]) == (1, 2)  # one worker (one GPU), two in flight
        marker = locks / "cpu.quarantined"
        marker.write_text("set by another process on this device\n")  # probed again 20 s from now
        wait_for(lambda: beats() == [b"1", b"1"], 10, "not every pool process reports the quarantine")
        time.sleep(2)  # the consumers are cancelled
        metrics = httpx.get(stack.base_url + "/metrics").text
        assert 'kernelgym_workers_alive{device_class="h100",quarantined="true"} 1.0' in metrics
        assert 'kernelgym_evaluation_slots_alive{device_class="h100",quarantined="true"} 2.0' in metrics
        with KernelGymClient(stack.base_url, timeout=30) as gym:
            ev = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, device_class="h100", wait=0)
            time.sleep(8)
            assert marker.exists() and gym.get(ev.id).status == "queued"  # nobody takes work
            done = gym.wait(ev.id, timeout=240)  # the probe passes, lifts the quarantine, work resumes
            assert done.status == "done" and done.verdict == "passed"
        assert not marker.exists()
        wait_for(lambda: beats() == [b"0", b"0"], 10, "the lifted quarantine is not reported")
