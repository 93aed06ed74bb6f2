"""What a worker refuses before it serves anything: settings under which an evaluation's child could reach what
the worker must keep from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gym_worker.run import refuse_unix_socket_broker


@pytest.mark.parametrize(
    "url", ["unix:///run/redis/redis.sock?db=0", "redis+socket:///tmp/redis.sock", "UNIX://:secret@/tmp/r.sock"]
)
def test_a_worker_refuses_a_redis_its_childrens_unix_sockets_could_reach(url):
    with pytest.raises(SystemExit, match="over a Unix socket"):
        refuse_unix_socket_broker(url)


@pytest.mark.parametrize("url", ["redis://:secret@redis:6379/0", "rediss://redis.internal:6380/1"])
def test_a_worker_takes_a_redis_over_tcp(url):
    refuse_unix_socket_broker(url)


def test_kernelgym_worker_says_why_it_will_not_start_on_a_unix_socket_redis(tmp_path):
    # The real command, before it imports Celery or torch: the message reaches the operator, nothing is served.
    env = {"KERNELGYM_REDIS_URL": f"unix://{tmp_path}/redis.sock", "KERNELGYM_GPU_LOCK_DIR": str(tmp_path), "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-m", "kernelgym", "worker", "--device-class", "cpu"],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "over a Unix socket (unix://)" in done.stderr, done.stderr[-2000:]
