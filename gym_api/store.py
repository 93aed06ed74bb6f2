"""The gateway's side of the records in Redis: jobs (the work a worker does), submissions (one caller's request
for a job's result), and the waiting for results.

A job may serve several submissions: an identical submission, from any API key, attaches to the job that is
already queued, running or done instead of running it again. Each submission has its own id and owner, so no
caller learns another's id or can cancel another's work; a job is cancelled only when the last submission that
wants it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import redis.asyncio as aioredis
from pydantic import BaseModel

from gym_api.errors import IdempotencyConflict, QuotaExceeded
from gym_common.jobs import FINAL, FINISH_SCRIPT, JobRecord, JobStatus, Keys, finish_call

log = logging.getLogger("kernelgym.gateway")

# Attaches a submission to a job unless the job is gone, cancelled (or being cancelled) or failed; creates the
# submission's record in the same step, so a cancellation cannot slip in between. KEYS: job hash, its wanted
# set, the submission hash. ARGV: submission id, ttl, then the submission hash's fields and values.
ATTACH_SCRIPT = """
local status = redis.call('HGET', KEYS[1], 'status')
if (not status) or status == 'cancelled' or status == 'failed' or redis.call('HGET', KEYS[1], 'cancel') == '1' then
  return 0
end
local ttl = tonumber(ARGV[2])
redis.call('HSET', KEYS[3], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[3], ttl)
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ttl)
if redis.call('TTL', KEYS[1]) < ttl then redis.call('EXPIRE', KEYS[1], ttl) end
return 1
"""

# Withdraws a submission. When it was the last one that wanted its job and the job is unfinished, flags the job
# for cancellation and returns 2 if it is queued (the caller finishes it), 1 if it is running (its worker stops
# it); else 0. KEYS: submission hash, the job's wanted set, job hash, done channel. ARGV: submission id, time.
DETACH_SCRIPT = """
if redis.call('HEXISTS', KEYS[1], 'cancelled') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'cancelled', ARGV[2])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', KEYS[4], 'detached')
if redis.call('SCARD', KEYS[2]) > 0 then return 0 end
local status = redis.call('HGET', KEYS[3], 'status')
if status ~= 'queued' and status ~= 'running' then return 0 end
redis.call('HSET', KEYS[3], 'cancel', '1')
if status == 'queued' then return 2 end
return 1
"""


class SubmissionRecord(BaseModel):
    """One caller's submission; `job` is the evaluation that answers it, possibly shared."""

    id: str
    owner: str
    job: str
    cached: bool
    created: float
    cancelled: float | None = None

    def to_hash(self) -> dict[str, str]:
        return {
            "id": self.id,
            "owner": self.owner,
            "job": self.job,
            "cached": "1" if self.cached else "0",
            "created": repr(self.created),
        }

    @classmethod
    def from_hash(cls, raw: dict[bytes, bytes]) -> SubmissionRecord:
        h = {k.decode(): v.decode() for k, v in raw.items()}
        return cls(
            id=h["id"],
            owner=h["owner"],
            job=h["job"],
            cached=h["cached"] == "1",
            created=float(h["created"]),
            cancelled=float(h["cancelled"]) if h.get("cancelled") else None,
        )


@dataclass(frozen=True)
class Tracked:
    """A submission with the current state of its job."""

    sub: SubmissionRecord
    job: JobRecord

    @property
    def final(self) -> bool:
        return self.sub.cancelled is not None or self.job.status in FINAL


def body_digest(body: BaseModel) -> str:
    """A request body's identity for Idempotency-Key checks (canonical JSON, so formatting does not matter)."""
    return hashlib.sha256(body.model_dump_json().encode()).hexdigest()


# How long a first request may take to be admitted while it holds its Idempotency-Key.
IDEMPOTENCY_CLAIM_S = 60


class JobStore:
    def __init__(self, r: aioredis.Redis, keys: Keys, job_ttl_s: int, cache_ttl_s: int):
        self.r = r
        self.keys = keys
        self.job_ttl_s = job_ttl_s
        self.cache_ttl_s = cache_ttl_s
        self.finish_script = r.register_script(FINISH_SCRIPT)
        self.attach_script = r.register_script(ATTACH_SCRIPT)
        self.detach_script = r.register_script(DETACH_SCRIPT)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    async def job(self, job_id: str) -> JobRecord | None:
        raw = await self.r.hgetall(self.keys.job(job_id))
        return JobRecord.from_hash(raw) if raw else None

    async def submission(self, submission_id: str) -> SubmissionRecord | None:
        raw = await self.r.hgetall(self.keys.submission(submission_id))
        return SubmissionRecord.from_hash(raw) if raw else None

    async def track(self, submission_id: str, owner: str) -> Tracked | None:
        """The caller's submission and its job; None for another key's submission, as for an unknown one."""
        sub = await self.submission(submission_id)
        if sub is None or sub.owner != owner:
            return None
        job = await self.job(sub.job)
        return Tracked(sub, job) if job else None

    async def cached(self, cache_key: str) -> JobRecord | None:
        """A reusable evaluation of the same submission: done, or still queued or running."""
        job_id = await self.r.get(self.keys.cache(cache_key))
        if job_id is None:
            return None
        job = await self.job(job_id.decode())
        if job is None or job.status in (JobStatus.CANCELLED, JobStatus.FAILED) or job.cancel_requested:
            return None
        return job

    async def admit(self, owner: str, plan: list[tuple[JobRecord, bool]], limit: int | None) -> list[Tracked | None]:
        """One submission per item of `plan` (a job and whether it is new), in one transaction: new jobs are
        created, every submission is attached to its job. None where an existing job was cancelled or failed
        meanwhile (the caller gives that item a new job). The transaction also checks the key's limit of `limit`
        unfinished evaluations (QuotaExceeded; None: no check), watching the key's set of them, so that concurrent
        requests of one key cannot pass the limit together."""
        active = self.keys.active(owner)
        await self.r.zremrangebyscore(active, "-inf", time.time() - self.job_ttl_s)
        new_jobs = len({job.id for job, new in plan if new})
        now = time.time()
        subs = [
            SubmissionRecord(id=self.new_id(), owner=owner, job=job.id, cached=not new, created=now)
            for job, new in plan
        ]
        while True:
            async with self.r.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(active)
                    if limit is not None and new_jobs and await pipe.zcard(active) + new_jobs > limit:
                        raise QuotaExceeded(
                            f"this API key may hold {limit} unfinished evaluations; this request would exceed that"
                        )
                    pipe.multi()
                    positions = await self._attach_all(pipe, plan, subs)
                    replies = await pipe.execute()
                    break
                except aioredis.WatchError:  # another request of this key changed its count: count again
                    continue
        return [
            Tracked(sub, job) if replies[i] else None for (job, _), sub, i in zip(plan, subs, positions, strict=True)
        ]

    async def _attach_all(
        self, pipe: Any, plan: list[tuple[JobRecord, bool]], subs: list[SubmissionRecord]
    ) -> list[int]:
        """Queue the new jobs and the submissions' attachments on `pipe`; returns each attachment's reply index."""
        created: set[str] = set()
        positions = []
        for (job, new), sub in zip(plan, subs, strict=True):
            if new and job.id not in created:
                created.add(job.id)
                self._create_job(pipe, job)
            if not new:
                pipe.incr(self.keys.cache_hits())
            fields = [x for kv in sub.to_hash().items() for x in kv]
            await self.attach_script(
                keys=[self.keys.job(job.id), self.keys.wanted(job.id), self.keys.submission(sub.id)],
                args=[sub.id, self.job_ttl_s, *fields],
                client=pipe,
            )
            positions.append(len(pipe.command_stack) - 1)
        return positions

    def _create_job(self, pipe: Any, job: JobRecord) -> None:
        pipe.hset(self.keys.job(job.id), mapping=job.to_hash())
        pipe.expire(self.keys.job(job.id), self.job_ttl_s)
        pipe.zadd(self.keys.active(job.owner), {job.id: job.created})
        pipe.expire(self.keys.active(job.owner), self.job_ttl_s)
        if self.cache_ttl_s:
            pipe.set(self.keys.cache(job.cache_key), job.id, ex=self.cache_ttl_s)

    async def finish(self, job: JobRecord, status: JobStatus, error: str = "") -> bool:
        keys, args = finish_call(self.keys, job, status, time.time(), self.job_ttl_s, error=error)
        return bool(await self.finish_script(keys=keys, args=args))

    async def withdraw(self, tracked: Tracked) -> Tracked:
        """Cancel a submission. Its job is cancelled only when no other submission still wants it: a queued
        job at once (its message is skipped when delivered), a running one by its worker."""
        sub, job = tracked.sub, tracked.job
        stopping = await self.detach_script(
            keys=[
                self.keys.submission(sub.id),
                self.keys.wanted(job.id),
                self.keys.job(job.id),
                self.keys.done_channel(job.id),
            ],
            args=[sub.id, repr(time.time())],
        )
        if stopping == 2:
            await self.finish(job, JobStatus.CANCELLED)
        elif not stopping and job.owner == sub.owner:
            # Others still want it: it no longer counts against this key's unfinished evaluations.
            await self.r.zrem(self.keys.active(job.owner), job.id)
        return await self.track(sub.id, sub.owner) or tracked

    # -- Idempotency-Key: the key remembers the body's digest and the submission it created -----------------
    async def claim_idempotency_key(self, owner: str, key: str, digest: str) -> str | None:
        """The submission id an earlier request with this key and body created, or None after claiming the key
        for this request. IdempotencyConflict for another body or a request still in progress."""
        redis_key = self.keys.idempotency(owner, key)
        # The claim lapses on its own if this process dies before the submission is recorded.
        if await self.r.set(redis_key, f"{digest}:", nx=True, ex=IDEMPOTENCY_CLAIM_S):
            return None
        stored = (await self.r.get(redis_key) or b":").decode()
        earlier_digest, _, submission_id = stored.partition(":")
        if earlier_digest != digest:
            raise IdempotencyConflict("this Idempotency-Key was already used with a different request body")
        if not submission_id:
            raise IdempotencyConflict("a request with this Idempotency-Key is still being processed; retry")
        return submission_id

    async def complete_idempotency_key(self, owner: str, key: str, digest: str, submission_id: str) -> None:
        await self.r.set(self.keys.idempotency(owner, key), f"{digest}:{submission_id}", ex=self.job_ttl_s)

    async def release_idempotency_key(self, owner: str, key: str) -> None:
        await self.r.delete(self.keys.idempotency(owner, key))


T = TypeVar("T")
# How long start-up waits for the result subscription.
SUBSCRIBE_WAIT_S = 2.0


class Waiters:
    """One pattern subscription per gateway process wakes every request waiting on a job."""

    def __init__(self, r: aioredis.Redis, keys: Keys):
        self.r = r
        self.keys = keys
        self.pending: dict[str, list[asyncio.Future[None]]] = {}
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def start(self) -> None:
        """Subscribe; with Redis down the gateway still starts (and answers 503) while the subscription retries.
        Requests waiting then re-read their jobs when it connects, so no result is missed."""
        self.task = asyncio.create_task(self._listen())
        try:
            await asyncio.wait_for(self.ready.wait(), timeout=SUBSCRIBE_WAIT_S)
        except TimeoutError:
            log.warning("starting without the result subscription; Redis is unreachable")

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

    async def wait(self, job_id: str, timeout: float, read: Callable[[], Awaitable[tuple[T, bool]]]) -> T:
        """`read()`'s value once it says it is final, or as it stands when `timeout` runs out; read again each
        time the job's channel publishes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            self.pending.setdefault(job_id, []).append(fut)
            value, final = await read()  # after registering, so a publication in between is not missed
            remaining = deadline - loop.time()
            if final or remaining <= 0:
                self._discard(job_id, fut)
                return value
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
