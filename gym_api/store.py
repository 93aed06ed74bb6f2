"""The gateway's side of the job records: create, read, cancel and wait, all in Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

import redis.asyncio as aioredis

from gym_common.jobs import FINAL, FINISH_SCRIPT, JobRecord, JobStatus, Keys, finish_call

log = logging.getLogger("kernelgym.gateway")


class JobStore:
    def __init__(self, r: aioredis.Redis, keys: Keys, job_ttl_s: int, cache_ttl_s: int):
        self.r = r
        self.keys = keys
        self.job_ttl_s = job_ttl_s
        self.cache_ttl_s = cache_ttl_s
        self.finish_script = r.register_script(FINISH_SCRIPT)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    async def get(self, job_id: str) -> JobRecord | None:
        raw = await self.r.hgetall(self.keys.job(job_id))
        return JobRecord.from_hash(raw) if raw else None

    async def cached(self, cache_key: str) -> JobRecord | None:
        """A reusable evaluation of the same submission: done, or still queued or running."""
        job_id = await self.r.get(self.keys.cache(cache_key))
        if job_id is None:
            return None
        job = await self.get(job_id.decode())
        if job is None or job.status in (JobStatus.CANCELLED, JobStatus.FAILED):
            return None
        await self.r.incr(self.keys.cache_hits())
        return job

    async def by_idempotency_key(self, owner: str, key: str) -> JobRecord | None:
        job_id = await self.r.get(self.keys.idempotency(owner, key))
        return await self.get(job_id.decode()) if job_id else None

    async def create(self, job: JobRecord, idempotency_key: str | None) -> None:
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(self.keys.job(job.id), mapping=job.to_hash())
        pipe.expire(self.keys.job(job.id), self.job_ttl_s)
        pipe.zadd(self.keys.active(job.owner), {job.id: job.created})
        pipe.expire(self.keys.active(job.owner), self.job_ttl_s)
        if self.cache_ttl_s:
            pipe.set(self.keys.cache(job.cache_key), job.id, ex=self.cache_ttl_s)
        if idempotency_key:
            pipe.set(self.keys.idempotency(job.owner, idempotency_key), job.id, ex=self.job_ttl_s)
        await pipe.execute()

    async def finish(self, job: JobRecord, status: JobStatus, error: str = "") -> bool:
        keys, args = finish_call(self.keys, job, status, time.time(), self.job_ttl_s, error=error)
        return bool(await self.finish_script(keys=keys, args=args))

    async def request_cancel(self, job: JobRecord) -> JobRecord:
        """A queued job is cancelled at once (its message is skipped when delivered); a running one is
        flagged, and its worker kills the evaluation and records the cancellation."""
        await self.r.hset(self.keys.job(job.id), "cancel", "1")
        if job.status is JobStatus.QUEUED:
            await self.finish(job, JobStatus.CANCELLED)
        return await self.get(job.id) or job

    async def active_count(self, owner: str) -> int:
        key = self.keys.active(owner)
        await self.r.zremrangebyscore(key, "-inf", time.time() - self.job_ttl_s)
        return await self.r.zcard(key)


class Waiters:
    """One pattern subscription per gateway process wakes every request waiting on a job."""

    def __init__(self, r: aioredis.Redis, keys: Keys):
        self.r = r
        self.keys = keys
        self.pending: dict[str, list[asyncio.Future[None]]] = {}
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def start(self) -> None:
        self.task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self.ready.wait(), timeout=10)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def _listen(self) -> None:
        prefix = self.keys.done_channel("")
        while True:
            try:
                pubsub = self.r.pubsub()
                await pubsub.psubscribe(prefix + "*")
                self.ready.set()
                # A reconnect may have missed messages: wake everyone so each re-reads its job.
                self._wake_all()
                async for message in pubsub.listen():
                    if message["type"] == "pmessage":
                        self._wake(message["channel"].decode()[len(prefix) :])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis gone: keep retrying, waiters fall back to their timeouts
                log.warning("result subscription lost: %s", exc)
                await asyncio.sleep(0.5)

    def _wake(self, job_id: str) -> None:
        for fut in self.pending.pop(job_id, []):
            if not fut.done():
                fut.set_result(None)

    def _wake_all(self) -> None:
        for job_id in list(self.pending):
            self._wake(job_id)

    async def wait(self, store: JobStore, job_id: str, timeout: float) -> JobRecord | None:
        """The job once final, or as it stands when `timeout` runs out."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.pending.setdefault(job_id, []).append(fut)
            job = await store.get(job_id)  # after registering, so a finish in between is not missed
            remaining = deadline - asyncio.get_running_loop().time()
            if job is None or job.status in FINAL or remaining <= 0:
                self._discard(job_id, fut)
                return job
            try:
                await asyncio.wait_for(fut, remaining)
            except TimeoutError:
                self._discard(job_id, fut)

    def _discard(self, job_id: str, fut: asyncio.Future[None]) -> None:
        waiting = self.pending.get(job_id)
        if waiting and fut in waiting:
            waiting.remove(fut)
            if not waiting:
                del self.pending[job_id]
