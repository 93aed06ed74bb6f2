"""Nothing is lost when a worker or Redis dies, and nothing internal shows while Redis is away: a worker killed whole
(`kill -9` of its process group) has its evaluation queued again through its lapsed lease; an evaluation that
finishes while Redis is down is stored once Redis is back, and one picked up just before is run once it is back;
after an outage the sweeper leaves running evaluations to renew their leases; after a Redis restart no request
gets a 503. One stack for the module (Redis, gateway, two CPU workers); the tests run in order and the first leaves
one worker."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis
from conftest import service_stack
from helpers import bundled_source, relu_candidate, unique
from test_service_faults import job_of, wait_until_running

from gym_client import KernelGymClient
from kernelgym.stack import LocalStack

RELU = "level1/1_ReLU"
SLOW = "import time\ntime.sleep(0.5)\nreturn triton_relu(x)"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with service_stack(tmp_path_factory.mktemp("recovery")) as s:
        yield s


@pytest.fixture
def gym(stack):
    with KernelGymClient(stack.base_url, timeout=30) as client:
        yield client


def parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_worker_killed_whole_has_its_evaluation_queued_again_within_a_minute(stack, gym):
    ev = gym.evaluate(unique(relu_candidate(SLOW)), problem_id=RELU, wait=0)
    job_key = f"kg:job:{job_of(stack, ev.id)}"
    wait_until_running(gym, ev.id)
    r = redis.Redis.from_url(stack.redis_url)
    pool_pid = int(r.hget(job_key, "worker").decode().rsplit(":", 1)[1])
    (worker,) = [w for w in stack.workers if w.pid == parent_pid(pool_pid)]
    os.killpg(worker.pid, signal.SIGKILL)  # the Celery main process, its pool and whatever shares its group
    killed = time.monotonic()
    worker.wait(10)
    while int(r.hget(job_key, "attempts")) < 2:  # the other worker has taken it again
        assert time.monotonic() - killed < 60, r.hgetall(job_key)
        time.sleep(0.2)
    final = gym.wait(ev.id, timeout=300)
    assert final.status == "done" and final.verdict == "passed" and final.raw["attempts"] == 2


def worker_log_lines(stack: LocalStack) -> list[dict]:
    lines = []
    for path in stack.dir.glob("worker*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                lines.append(json.loads(line))
    return lines


def test_an_evaluation_that_finishes_while_redis_is_down_is_stored_when_it_is_back(stack, gym):
    ev = gym.evaluate(unique(relu_candidate(SLOW)), problem_id=RELU, wait=0)
    job_id = job_of(stack, ev.id)
    r = redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + 120
    while r.hget(f"kg:job:{job_id}", "status") != b"running":
        fields = ("status", "attempts", "worker", "started", "finished", "error")
        assert time.monotonic() < deadline, dict(zip(fields, r.hmget(f"kg:job:{job_id}", fields), strict=True))
        time.sleep(0.1)
    stack.stop_redis()
    try:
        deadline = time.monotonic() + 180
        while not any(
            line.get("message", "").startswith("storing the outcome: Redis unreachable")
            and line.get("evaluation_id") == job_id
            for line in worker_log_lines(stack)
        ):
            assert time.monotonic() < deadline, "the evaluation did not finish while Redis was down"
            time.sleep(0.5)
    finally:
        stack.start_redis()  # the same data directory: its append-only file is replayed
    final = gym.wait(ev.id, timeout=120, poll=2.0)
    assert final.status == "done" and final.verdict == "passed" and final.raw["attempts"] == 1


def test_after_a_redis_restart_every_request_is_answered_and_nothing_internal_shows_meanwhile(stack, gym):
    queued = {"candidate": bundled_source(RELU), "problem_id": RELU, "device_class": "h100"}

    def one(i: int) -> int:
        if i % 3 == 0:
            body = {**queued, "candidate": unique(queued["candidate"])}
            return httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, timeout=30).status_code
        return httpx.get(stack.base_url + "/problems", timeout=30).status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(one, range(32))) <= {200, 202}  # the gateway's pool holds many connections now
        stack.stop_redis()
        ready = httpx.get(stack.base_url + "/readyz", timeout=30)
        assert ready.status_code == 503 and ready.json() == {"ready": False, "redis": "unreachable"}
        metrics = httpx.get(stack.base_url + "/metrics", timeout=30).text
        assert "kernelgym_redis_up 0.0" in metrics
        assert "kernelgym_queue_depth" not in metrics and "kernelgym_workers_alive" not in metrics  # nothing stale
        stack.start_redis()
        # Sent at once: the worker's pooled connections were closed too, and its task reads its job on one.
        after = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, wait=0)
        codes = list(pool.map(one, range(60)))
    assert codes.count(503) == 0 and set(codes) <= {200, 202}, codes
    metrics = httpx.get(stack.base_url + "/metrics", timeout=30).text
    assert "kernelgym_redis_up 1.0" in metrics and 'kernelgym_queue_depth{queue="kg.h100.normal"}' in metrics
    assert str(stack.redis_port) not in httpx.get(stack.base_url + "/readyz", timeout=30).text
    assert gym.wait(after.id, timeout=120).verdict == "passed"


def test_a_delivery_taken_while_redis_is_down_runs_once_redis_is_back(stack, gym, tmp_path):
    # Until a worker holds its lease nothing would queue a job again: a delivery that failed on an unreachable
    # Redis would leave its job `queued` with no message. A worker's pool process, in this process, is handed
    # the job while Redis restarts (the job waits on the h100 queue, which no worker of the stack serves).
    from celery import Celery

    from gym_common.settings import ServiceSettings
    from gym_worker.tasks import WorkerState
    from services.settings import EvalSettings

    ev = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, device_class="h100", wait=0)
    job_id = job_of(stack, ev.id)
    service = ServiceSettings(redis_url=stack.redis_url, device_class="cpu", gpu_lock_dir=str(tmp_path))
    state = WorkerState(Celery("test"), service, EvalSettings(correctness_trials=2, warm_children=1))
    try:
        stack.stop_redis()
        with ThreadPoolExecutor(1) as pool:
            delivery = pool.submit(state.run, job_id)
            time.sleep(3)  # longer than the Redis client's own retries
            assert not delivery.done()
            stack.start_redis()
            delivery.result(timeout=120)
    finally:
        state.close()
    final = gym.wait(ev.id, timeout=60)
    assert final.status == "done" and final.verdict == "passed" and final.raw["attempts"] == 1


def test_after_a_redis_outage_the_sweeper_waits_a_lease_before_queueing_a_running_evaluation_again(stack, gym):
    # No lease is renewed while Redis is away, so after an outage longer than a lease every running evaluation's
    # has lapsed: queued again at once, one would run twice beside its still-running worker. Here a job stands for
    # such an evaluation (on the h100 queue, which no worker serves): running, its lease lapsing during the outage.
    ev = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, device_class="h100", wait=0)
    job_id = job_of(stack, ev.id)
    r = redis.Redis.from_url(stack.redis_url)
    r.hset(f"kg:job:{job_id}", "status", "running")
    r.zadd("kg:running", {job_id: time.time() - 17})  # a lease of 20 s renewed 17 s ago: it lapses in the outage
    stack.stop_redis()
    time.sleep(12)  # the gateway's sweeps (every 5 s) fail meanwhile
    stack.start_redis()
    r = redis.Redis.from_url(stack.redis_url)
    time.sleep(10)  # two sweeps' time, within the lease's length the workers are given
    assert r.hget(f"kg:job:{job_id}", "status") == b"running"
    assert r.zscore("kg:running", job_id) is not None
