"""What a worker keeps in Redis besides a job's transitions (gym_worker.tasks): the shared reference timings, which
tolerate an unreachable Redis, and the retry that makes a finished evaluation's outcome outlive an outage."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

import redis

from gym_common.jobs import Keys
from gym_common.leases import CLAIM_SCRIPT, RELEASE_SCRIPT

log = logging.getLogger("kernelgym.worker")

# Redis errors worth waiting out when storing an outcome: the server is down, restarting or still loading.
REDIS_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)
# The longest pause between two tries of a write: how soon after Redis is back an outcome is stored.
RETRY_MAX_DELAY_S = 2.0
T = TypeVar("T")


def persist(limit_s: float, job_id: str, write: Callable[[], T], doing: str = "storing the outcome") -> T:
    """`write()`, retried while Redis is unreachable for up to `limit_s`: an evaluation's outcome, and a delivery
    taken from the queue, outlive an outage of Redis. Past that it raises; the evaluation's lease then lapses and a
    gateway queues it again (gym_common.leases). `doing`: what the log lines say was waited for."""
    deadline = time.monotonic() + limit_s
    delay, failed_at = 0.25, None
    while True:
        try:
            value = write()
        except REDIS_UNREACHABLE as exc:
            if failed_at is None:
                failed_at = time.monotonic()
                log.warning(
                    f"{doing}: Redis unreachable; retrying",
                    extra={"evaluation_id": job_id, "error": f"{type(exc).__name__}: {exc}"},
                )
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, RETRY_MAX_DELAY_S)
            continue
        if failed_at is not None:
            waited = round(time.monotonic() - failed_at, 1)
            log.info(f"{doing}: done after a Redis outage", extra={"evaluation_id": job_id, "waited_s": waited})
        return value


def alive(pid: int) -> bool:
    """Whether a process of this host (or its PID namespace) exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class RedisTimingStore:
    """Reference timings shared by every worker of a device class (the key names the GPU and versions), and
    the claims that let one evaluation at a time time a reference (`services.timing_cache`).
    A Redis failure only costs a re-timing; it never fails the evaluation."""

    def __init__(self, r: redis.Redis, keys: Keys, ttl_s: int):
        self.r, self.keys, self.ttl_s = r, keys, ttl_s
        self._claim = r.register_script(CLAIM_SCRIPT)
        self._unclaim = r.register_script(RELEASE_SCRIPT)

    def get(self, key: str) -> str | None:
        try:
            raw = self.r.get(self.keys.reference_timing(key))
        except redis.RedisError as exc:
            log.warning("reference timing not read: %s", exc)
            return None
        return raw.decode() if raw is not None else None

    def put(self, key: str, value: str) -> None:
        try:
            self.r.set(self.keys.reference_timing(key), value, ex=self.ttl_s)
        except redis.RedisError as exc:
            log.warning("reference timing not stored: %s", exc)

    def claim(self, key: str, owner: str, ttl_s: float) -> bool:
        try:
            return bool(self._claim(keys=[self.keys.reference_timing_claim(key)], args=[owner, int(ttl_s * 1000)]))
        except redis.RedisError as exc:
            log.warning("reference timing not claimed (timed here regardless): %s", exc)
            return True

    def unclaim(self, key: str, owner: str) -> None:
        try:
            self._unclaim(keys=[self.keys.reference_timing_claim(key)], args=[owner])
        except redis.RedisError as exc:  # the claim expires on its own
            log.warning("reference timing claim not dropped: %s", exc)
