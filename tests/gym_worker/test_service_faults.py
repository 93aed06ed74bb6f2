"""Faults of the service's parts, each against its own live stack: a worker killed mid-evaluation, an
evaluation whose worker keeps dying, Redis restarted with evaluations queued (and a client waiting on one), a
gateway port taken by another process before the gateway could bind it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis
from conftest import WORKER_ENV
from helpers import bundled_source, relu_candidate, unique

from gym_client import KernelGymClient
from kernelgym.stack import LocalStack

RELU = "level1/1_ReLU"


@pytest.fixture
def make_stack(tmp_path):
    stacks: list[LocalStack] = []

    def make(**env: str) -> LocalStack:
        s = LocalStack(tmp_path / f"stack{len(stacks)}", env={**WORKER_ENV, **env})
        stacks.append(s)
        s.start_redis()
        s.start_gateway()
        return s

    yield make
    for s in stacks:
        s.close()


def test_a_gateway_whose_port_another_process_took_starts_on_a_fresh_one(tmp_path):
    stack = LocalStack(tmp_path / "stack", env=WORKER_ENV)
    try:
        stack.start_redis()
        taken = stack.gateway_port
        with socket.socket() as squatter:  # listens and never answers, as a busy neighbour's socket would
            squatter.bind(("127.0.0.1", taken))
            squatter.listen()
            stack.start_gateway()
            assert stack.gateway_port != taken
            assert httpx.get(stack.base_url + "/healthz", timeout=5).status_code == 200
        assert b"address already in use" in (tmp_path / "stack" / "gateway.log").read_bytes()
    finally:
        stack.close()


def job_of(stack: LocalStack, evaluation_id: str) -> str:
    """The id of the job (the work a worker does) behind a submission's id."""
    return redis.Redis.from_url(stack.redis_url).hget(f"kg:sub:{evaluation_id}", "job").decode()


def count_finishes(stack: LocalStack, job_id: str) -> tuple[threading.Thread, list[str]]:
    """Every publication of the job's final status, from now on."""
    seen: list[str] = []
    pubsub = redis.Redis.from_url(stack.redis_url).pubsub()
    pubsub.subscribe(f"kg:done:{job_id}")

    def listen() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                message = pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            except redis.RedisError:  # the stack is gone
                return
            if message:
                seen.append(message["data"].decode())

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    return thread, seen


def wait_until_running(gym: KernelGymClient, job_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while (ev := gym.get(job_id)).status != "running":
        assert time.monotonic() < deadline, f"never started: {ev.status}"
        time.sleep(0.1)
    return ev.raw


def test_worker_killed_mid_evaluation_is_redelivered_and_completes_exactly_once(make_stack):
    stack = make_stack()
    stack.start_worker()
    stack.wait_ready()
    slow = unique(relu_candidate("import time\ntime.sleep(0.5)\nreturn triton_relu(x)"))
    with KernelGymClient(stack.base_url, timeout=30) as gym:
        ev = gym.evaluate(slow, problem_id=RELU, wait=0)
        job_id = job_of(stack, ev.id)
        _, finishes = count_finishes(stack, job_id)
        wait_until_running(gym, ev.id)
        job = redis.Redis.from_url(stack.redis_url).hgetall(f"kg:job:{job_id}")
        pool_pid = int(job[b"worker"].decode().rsplit(":", 1)[1])
        os.kill(pool_pid, signal.SIGKILL)  # the Celery pool process running the task
        final = gym.wait(ev.id, timeout=300)
        assert final.status == "done" and final.verdict == "passed"
        assert final.raw["attempts"] == 2
        time.sleep(1.0)
        assert finishes == ["done"]


def test_an_evaluation_whose_worker_keeps_dying_ends_crashed_after_its_attempts(make_stack):
    # The sandbox lets a candidate signal nothing but itself, so the test kills the pool process running the
    # evaluation on every attempt, as a candidate that crashed its worker would.
    stack = make_stack(KERNELGYM_MAX_ATTEMPTS="2")
    stack.start_worker()
    stack.wait_ready()
    slow = unique(relu_candidate("import time\ntime.sleep(0.5)\nreturn triton_relu(x)"))
    r = redis.Redis.from_url(stack.redis_url)
    with KernelGymClient(stack.base_url, timeout=30) as gym:
        ev = gym.evaluate(slow, problem_id=RELU, wait=0)
        job = f"kg:job:{job_of(stack, ev.id)}"
        killed: set[bytes] = set()
        deadline = time.monotonic() + 300
        while len(killed) < 2 and time.monotonic() < deadline:
            status, worker = r.hmget(job, "status", "worker")
            if status == b"running" and worker and worker not in killed:
                os.kill(int(worker.decode().rsplit(":", 1)[1]), signal.SIGKILL)
                killed.add(worker)
            time.sleep(0.1)
        final = gym.wait(ev.id, timeout=400)
        assert final.status == "done" and final.verdict == "crashed"
        assert "2 attempts" in final.feedback
        # The worker survives and serves the next evaluation.
        after = gym.evaluate(bundled_source(RELU), problem_id=RELU, wait=200)
        assert after.verdict == "passed"


def test_queued_evaluations_survive_a_redis_restart_and_a_waiting_client_rides_it_out(make_stack):
    stack = make_stack()
    with KernelGymClient(stack.base_url, timeout=30) as gym, ThreadPoolExecutor(1) as pool:
        queued = [gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, wait=0) for _ in range(3)]
        assert {e.status for e in queued} == {"queued"}
        waiting = pool.submit(gym.wait, queued[0].id, 300, 2.0)  # long-polls across the restart
        time.sleep(1.0)
        stack.stop_redis()
        time.sleep(3.0)  # its polls get 503 with Retry-After meanwhile, and it waits as told
        assert not waiting.done()
        stack.start_redis()  # same port and data directory: the append-only file is replayed
        stack.start_worker()
        stack.wait_ready()
        assert waiting.result().verdict == "passed"
        finals = [gym.wait(e.id, timeout=300) for e in queued[1:]]
        assert [f.verdict for f in finals] == ["passed"] * 2


def test_a_redis_that_cannot_persist_answers_503_with_retry_after(make_stack):
    stack = make_stack()
    r = redis.Redis.from_url(stack.redis_url)
    shutil.rmtree(stack.dir / "redis")  # its data directory is gone, so its next snapshot fails
    r.config_set("save", "3600 1")  # with a save point, a failed snapshot stops writes: MISCONF
    r.bgsave()
    deadline = time.monotonic() + 30
    while r.info("persistence")["rdb_last_bgsave_status"] != "err":
        assert time.monotonic() < deadline, "the snapshot did not fail"
        time.sleep(0.1)
    body = {"candidate": bundled_source(RELU), "problem_id": RELU}
    answer = httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, timeout=30)
    r.config_set("save", "")  # else its shutdown tries to save again, fails and waits to be killed
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5", answer.text


def test_redis_down_answers_503_with_retry_after(make_stack, tmp_path):
    stack = make_stack()
    stack.stop_redis()
    body = {"candidate": bundled_source(RELU), "problem_id": RELU}
    late = LocalStack(tmp_path / "late")  # a gateway that starts while Redis is down answers too
    late.redis_port = stack.redis_port
    try:
        late.start_gateway()
        for method, path, json in (
            ("POST", "/evaluate", body),
            ("POST", "/evaluate/batch", {"items": [body]}),
            ("GET", "/evaluations/" + "0" * 32, None),
            ("GET", "/problems", None),
        ):
            for gateway in (stack, late):
                r = httpx.request(method, gateway.base_url + path, json=json, params={"wait": 0}, timeout=30)
                assert r.status_code == 503, (path, r.text)
                assert r.headers["retry-after"] == "5" and "Redis" in r.json()["detail"]
        assert httpx.get(stack.base_url + "/readyz", timeout=30).status_code == 503
    finally:
        late.close()
