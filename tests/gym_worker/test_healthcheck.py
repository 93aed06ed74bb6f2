"""`kernelgym healthcheck http|worker`, the containers' health checks, run as real subprocesses against a
live stack (real Redis, gateway and CPU workers)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import redis

from kernelgym.stack import free_port


def run_probe(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELGYM_REDIS_URL": redis_url}
    return subprocess.run(
        [sys.executable, "-m", "kernelgym", "healthcheck", *args], env=env, capture_output=True, text=True, timeout=60
    )


def fake_heartbeat(stack, host: str, quarantined: bool, seen: float) -> str:
    key = f"kg:worker:h100@{host}:4242"
    r = redis.Redis.from_url(stack.redis_url)
    r.hset(
        key,
        mapping={
            "device_class": "h100",
            "device": "cuda",
            "quarantined": "1" if quarantined else "0",
            "current": "",
            "seen": repr(seen),
        },
    )
    r.expire(key, 30)
    return key


def healthcheck(stack, *args: str) -> subprocess.CompletedProcess[str]:
    return run_probe(stack.redis_url, *args)


def test_http_probe_passes_on_the_gateway_and_fails_where_nothing_listens(stack):
    ok = healthcheck(stack, "http", "--url", stack.base_url + "/healthz")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("healthy:")
    down = healthcheck(stack, "http", "--url", f"http://127.0.0.1:{free_port()}/healthz", "--timeout", "2")
    assert down.returncode == 1
    assert "unhealthy:" in down.stdout and "ConnectError" in down.stdout


def test_http_probe_fails_on_a_non_200_answer(stack):
    missing = healthcheck(stack, "http", "--url", stack.base_url + "/no-such-route")
    assert missing.returncode == 1
    assert "HTTP 404" in missing.stdout


def test_worker_probe_sees_this_hosts_live_workers(stack):
    proc = healthcheck(stack, "worker")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"on {socket.gethostname()} (cpu)" in proc.stdout


def test_worker_probe_fails_for_a_host_without_workers_and_treats_globs_literally(stack):
    assert healthcheck(stack, "worker", "--hostname", "no-such-host").returncode == 1
    # `*` would match every host if it were passed to SCAN as a pattern.
    star = healthcheck(stack, "worker", "--hostname", "*")
    assert star.returncode == 1
    assert "no fresh worker heartbeat from host *" in star.stdout


def test_worker_probe_fails_on_a_quarantined_gpu_unless_allowed(stack):
    key = fake_heartbeat(stack, "gpu-box-7", quarantined=True, seen=time.time())
    try:
        sick = healthcheck(stack, "worker", "--hostname", "gpu-box-7")
        assert sick.returncode == 1
        assert "quarantined" in sick.stdout
        assert healthcheck(stack, "worker", "--hostname", "gpu-box-7", "--allow-quarantined").returncode == 0
    finally:
        redis.Redis.from_url(stack.redis_url).delete(key)


def test_worker_probe_ignores_a_stale_heartbeat(stack):
    key = fake_heartbeat(stack, "gpu-box-8", quarantined=False, seen=time.time() - 3600)
    try:
        stale = healthcheck(stack, "worker", "--hostname", "gpu-box-8")
        assert stale.returncode == 1
        assert "no fresh worker heartbeat" in stale.stdout
    finally:
        redis.Redis.from_url(stack.redis_url).delete(key)


def test_worker_probe_fails_when_redis_is_unreachable():
    proc = run_probe(f"redis://127.0.0.1:{free_port()}/0", "worker")
    assert proc.returncode == 1
    assert "Redis unreachable" in proc.stdout
