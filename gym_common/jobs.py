"""Jobs as both sides see them: Redis key layout, queue names, the job record and its transitions.

A job is a Redis hash with a TTL. The gateway creates it `queued` and enqueues only its id; a worker
moves it to `running` and then, exactly once (an atomic script), to `done` with the result. A
cancelled job is `cancelled` and never gets a result. Everything is in Redis, so any number of
gateway replicas and workers see the same state.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from services.schema import PROTOCOL_VERSION, EvalRequest, EvalResult

TASK_NAME = "kernelgym.evaluate"
Priority = Literal["high", "normal", "low"]
PRIORITIES: tuple[Priority, ...] = ("high", "normal", "low")


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"  # the service could not evaluate (e.g. the reference itself failed); not a verdict


FINAL = (JobStatus.DONE, JobStatus.CANCELLED, JobStatus.FAILED)


class Keys:
    """Every Redis key and channel, under one prefix."""

    def __init__(self, prefix: str):
        self.p = prefix

    def job(self, job_id: str) -> str:
        return f"{self.p}:job:{job_id}"

    def done_channel(self, job_id: str) -> str:
        return f"{self.p}:done:{job_id}"

    def cache(self, cache_key: str) -> str:
        return f"{self.p}:cache:{cache_key}"

    def reference_timing(self, timing_key: str) -> str:
        return f"{self.p}:reftime:{timing_key}"

    def reference_timing_claim(self, timing_key: str) -> str:
        return f"{self.p}:refclaim:{timing_key}"

    def idempotency(self, owner: str, key: str) -> str:
        return f"{self.p}:idem:{owner}:{hashlib.sha256(key.encode()).hexdigest()[:32]}"

    def active(self, owner: str) -> str:
        return f"{self.p}:active:{owner}"

    def rate(self, owner: str, minute: int) -> str:
        return f"{self.p}:rate:{owner}:{minute}"

    def worker(self, name: str) -> str:
        return f"{self.p}:worker:{name}"

    def worker_pattern(self) -> str:
        return f"{self.p}:worker:*"

    def verdicts(self) -> str:
        return f"{self.p}:stats:verdicts"

    def durations(self) -> str:
        return f"{self.p}:stats:durations"

    def cache_hits(self) -> str:
        return f"{self.p}:stats:cache_hits"

    def finished(self) -> str:
        """Evaluations that reached a final status, by status (done, cancelled, failed)."""
        return f"{self.p}:stats:finished"

    def lease(self, job_id: str) -> str:
        """The running job's lease, held by its worker process (gym_common.leases)."""
        return f"{self.p}:lease:{job_id}"

    def running(self) -> str:
        """Jobs a worker took, scored by when their lease was last renewed (gym_common.leases)."""
        return f"{self.p}:running"

    def failed_reference(self, owner: str, device_class: str, digest: str) -> str:
        """An inline reference of this owner that failed on this device class (gym_common.failed_references)."""
        return f"{self.p}:badref:{owner}:{device_class}:{digest}"

    def reference_failures(self, owner: str) -> str:
        """How many of an owner's inline references failed within the window."""
        return f"{self.p}:reffails:{owner}"

    def reference_pause(self, owner: str) -> str:
        """While it exists, the owner's inline references are refused (429)."""
        return f"{self.p}:refpause:{owner}"

    def submission(self, submission_id: str) -> str:
        """One caller's submission: its owner and the job that evaluates it (gym_api.store)."""
        return f"{self.p}:sub:{submission_id}"

    def wanted(self, job_id: str) -> str:
        """The submissions that still want a job's result; the job is cancelled when none is left."""
        return f"{self.p}:wanted:{job_id}"

    def device_classes(self) -> str:
        """Device classes that workers served, with when a gateway last saw one's heartbeat."""
        return f"{self.p}:device_classes"

    def queue(self, device_class: str, priority: Priority) -> str:
        """The Celery queue (a Redis list) for a device class and priority."""
        return f"{self.p}.{device_class}.{priority}"

    def queues(self, device_class: str) -> list[str]:
        """A worker's queues, highest priority first."""
        return [self.queue(device_class, p) for p in PRIORITIES]


# Buckets (seconds) of the evaluation-duration histogram the workers keep in Redis.
DURATION_BUCKETS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class JobRecord(BaseModel):
    """The job hash, decoded. `request` is what the worker evaluates; `result` appears once `done`."""

    id: str
    status: JobStatus
    owner: str
    device_class: str
    priority: Priority
    cache_key: str
    request: EvalRequest
    problem: str = Field(description="The problem id, or `reference` for inline reference source.")
    reference_source: str = Field(description="Resolved by the gateway, so workers need no problem set.")
    created: float
    started: float | None = None
    finished: float | None = None
    attempts: int = 0
    worker: str | None = None
    cancel_requested: bool = False
    result: EvalResult | None = None
    error: str | None = None

    def to_hash(self) -> dict[str, str]:
        return {
            "id": self.id,
            "status": self.status.value,
            "owner": self.owner,
            "device_class": self.device_class,
            "priority": self.priority,
            "cache_key": self.cache_key,
            "request": self.request.model_dump_json(),
            "problem": self.problem,
            "reference_source": self.reference_source,
            "created": repr(self.created),
            "attempts": str(self.attempts),
        }

    @classmethod
    def from_hash(cls, raw: dict[Any, Any]) -> JobRecord:
        h = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }
        return cls(
            id=h["id"],
            status=JobStatus(h["status"]),
            owner=h["owner"],
            device_class=h["device_class"],
            priority=h["priority"],
            cache_key=h["cache_key"],
            request=EvalRequest.model_validate_json(h["request"]),
            problem=h["problem"],
            reference_source=h["reference_source"],
            created=float(h["created"]),
            started=float(h["started"]) if h.get("started") else None,
            finished=float(h["finished"]) if h.get("finished") else None,
            attempts=int(h.get("attempts", 0)),
            worker=h.get("worker") or None,
            cancel_requested=h.get("cancel") == "1",
            result=EvalResult.model_validate_json(h["result"]) if h.get("result") else None,
            error=h.get("error") or None,
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Submission(BaseModel):
    """What identifies a result: the same submission on the same kind of device gives the same result."""

    candidate: str
    reference: str = Field(description="The reference source (a problem id is resolved to its source).")
    options: dict[str, Any]
    device_class: str

    def cache_key(self) -> str:
        body = json.dumps(
            {
                "protocol": PROTOCOL_VERSION,
                "candidate": self.candidate,
                "reference": self.reference,
                "options": self.options,
                "device_class": self.device_class,
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(body.encode()).hexdigest()


# Moves a job to a final status exactly once, publishes it, drops it from its owner's unfinished set and,
# unless it is `done`, from the cache, and counts it by status. KEYS: job hash, done channel, owner's active
# set, cache entry, finished-by-status counts. ARGV: status, finished time, result JSON or "", error or "", ttl,
# job id. Returns 1 if this call finished it.
FINISH_SCRIPT = """
local status = redis.call('HGET', KEYS[1], 'status')
if (not status) or status == 'done' or status == 'cancelled' or status == 'failed' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'finished', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'result', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[4]) end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('ZREM', KEYS[3], ARGV[6])
if ARGV[1] ~= 'done' and redis.call('GET', KEYS[4]) == ARGV[6] then redis.call('DEL', KEYS[4]) end
redis.call('HINCRBY', KEYS[5], ARGV[1], 1)
redis.call('PUBLISH', KEYS[2], ARGV[1])
return 1
"""


def finish_call(
    keys: Keys, job: JobRecord, status: JobStatus, now: float, ttl_s: int, result_json: str = "", error: str = ""
) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of FINISH_SCRIPT for a job, for the sync (worker) and async (gateway) clients alike."""
    return (
        [
            keys.job(job.id),
            keys.done_channel(job.id),
            keys.active(job.owner),
            keys.cache(job.cache_key),
            keys.finished(),
        ],
        [status.value, repr(now), result_json, error, ttl_s, job.id],
    )
