"""The gateway's sweeper: every heartbeat, queue again each evaluation whose worker stopped renewing its lease
(gym_common.leases). Every gateway process runs one; the script lets one of them win each job."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from gym_api.store import JobStore
from gym_common.jobs import JobRecord, JobStatus, Keys
from gym_common.leases import REQUEUE_SCRIPT, lease_s

log = logging.getLogger("kernelgym.gateway")

REQUEUED, CANCEL = 1, 2


class Sweeper:
    """A background task of the gateway's event loop, started and stopped with the application."""

    def __init__(
        self,
        r: aioredis.Redis,
        store: JobStore,
        send: Callable[[JobRecord], Awaitable[None]],
        heartbeat_s: float,
    ):
        self.r = r
        self.keys: Keys = store.keys
        self.store = store
        self.send = send
        self.every_s = heartbeat_s
        self.lease_s = lease_s(heartbeat_s)
        self.requeue = r.register_script(REQUEUE_SCRIPT)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def _loop(self) -> None:
        failing = False
        quiet_until = 0.0
        while True:
            try:
                if failing or time.monotonic() < quiet_until:
                    await self.r.ping()  # an outage meanwhile starts the wait again
                    if failing:
                        # No lease could be renewed while Redis was away, and those of running evaluations may
                        # have lapsed: their workers get a lease's length to renew them before any is queued again.
                        failing = False
                        quiet_until = time.monotonic() + self.lease_s
                else:
                    await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis unreachable: the next sweep tries again (logged once per outage)
                if not failing:
                    log.warning("lease sweep failed: %s: %s", type(exc).__name__, exc)
                failing = True
            await asyncio.sleep(self.every_s)

    async def sweep(self) -> list[str]:
        """Queue again the jobs whose lease lapsed; the ids of those queued again."""
        stale = await self.r.zrangebyscore(self.keys.running(), "-inf", time.time() - self.lease_s)
        requeued = []
        for raw in stale:
            job_id = raw.decode()
            outcome = await self.requeue(
                keys=[self.keys.job(job_id), self.keys.lease(job_id), self.keys.running()], args=[job_id]
            )
            job = await self.store.job(job_id) if outcome else None
            if job is None:
                continue
            if outcome == CANCEL:
                await self.store.finish(job, JobStatus.CANCELLED)
                continue
            try:
                await self.send(job)
            except Exception:  # back into the running set: the next sweep sends it again
                await self.r.zadd(self.keys.running(), {job_id: 0})
                raise
            requeued.append(job_id)
            log.warning(
                "evaluation queued again: its worker stopped renewing its lease",
                extra={"evaluation_id": job_id, "attempts": job.attempts, "worker": job.worker},
            )
        return requeued
