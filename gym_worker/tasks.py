"""The evaluation task. It supervises the kernel through the evaluation core's child processes, so it
always ends with an outcome, and it records that outcome exactly once in the job record.

Start a worker with `kernelgym worker` (which runs Celery with this module as its app).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time

import redis
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_process_shutdown

from gym_common.jobs import DURATION_BUCKETS, FINAL, FINISH_SCRIPT, TASK_NAME, JobRecord, JobStatus, Keys, finish_call
from gym_common.queue import make_celery
from gym_common.settings import ServiceSettings
from gym_worker.health import device_fault
from services.evaluator import EvaluationError, Evaluator, environment
from services.problems import Problem
from services.schema import EvalResult, Verdict
from services.settings import EvalSettings

log = logging.getLogger("kernelgym.worker")
settings = ServiceSettings()
app = make_celery(settings)


class RedisTimingStore:
    """Reference timings shared by every worker of a device class (the key names the GPU and versions).
    A Redis failure only costs a re-timing; it never fails the evaluation."""

    def __init__(self, r: redis.Redis, keys: Keys, ttl_s: int):
        self.r, self.keys, self.ttl_s = r, keys, ttl_s

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


class WorkerState:
    """What one worker process holds between tasks: its Redis client, warm evaluator and health."""

    def __init__(self, service: ServiceSettings, eval_settings: EvalSettings):
        self.s = service
        self.r = redis.Redis.from_url(service.redis_url)
        self.keys = Keys(service.key_prefix)
        self.finish_script = self.r.register_script(FINISH_SCRIPT)
        self.device = "cpu" if service.device_class == "cpu" else "cuda"
        self.name = f"{service.device_class}@{socket.gethostname()}:{os.getpid()}"
        self.evaluator = Evaluator(eval_settings)
        ttl = service.reference_timing_ttl_s
        self.timings = RedisTimingStore(self.r, self.keys, ttl) if ttl > 0 else None
        self.evaluator.pool.prewarm(self.device)
        self.infra_failures = 0
        self.quarantined = False
        self.current: str | None = None
        self.node = ""
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="kg-heartbeat", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        ttl = max(2, int(self.s.heartbeat_s * 3))
        while not self._stop.is_set():
            try:
                self.r.hset(
                    self.keys.worker(self.name),
                    mapping={
                        "device_class": self.s.device_class,
                        "device": self.device,
                        "quarantined": "1" if self.quarantined else "0",
                        "current": self.current or "",
                        "seen": repr(time.time()),
                    },
                )
                self.r.expire(self.keys.worker(self.name), ttl)
            except redis.RedisError as exc:
                log.warning("heartbeat failed: %s", exc)
            self._stop.wait(self.s.heartbeat_s)

    def close(self) -> None:
        self._stop.set()
        self.evaluator.close()
        with contextlib.suppress(redis.RedisError):
            self.r.delete(self.keys.worker(self.name))

    # -- one job -------------------------------------------------------------------------------------
    def run(self, job_id: str, node: str) -> None:
        """One delivery of a job; `node` is this worker's Celery node name (for quarantine)."""
        self.node = node
        key = self.keys.job(job_id)
        raw = self.r.hgetall(key)
        if not raw:
            log.warning("job unknown or expired", extra={"evaluation_id": job_id})
            return
        job = JobRecord.from_hash(raw)
        if job.status in FINAL:  # a redelivery of a job another worker finished
            return
        if job.cancel_requested:
            self.finish(job, JobStatus.CANCELLED)
            return
        attempts = self.r.hincrby(key, "attempts", 1)
        if attempts > self.s.max_attempts:
            text = (
                f"The candidate killed its worker process on each of {self.s.max_attempts} attempts "
                "(e.g. a crash that escaped the sandbox); it was not run again."
            )
            self.finish(job, JobStatus.DONE, self.crashed(job, text))
            return
        self.r.hset(key, mapping={"status": JobStatus.RUNNING.value, "started": repr(time.time()), "worker": self.name})
        log.info("evaluation started", extra={"evaluation_id": job_id, "attempt": attempts})
        self.current = job_id
        watcher = threading.Thread(target=self._watch_cancel, args=(key,), daemon=True)
        watcher.start()
        t0 = time.monotonic()
        try:
            outcome = self.evaluate(job)
        finally:
            self.current = None
        cancelled = self.r.hget(key, "cancel") == b"1"
        if cancelled:
            self.finish(job, JobStatus.CANCELLED)
        elif isinstance(outcome, EvalResult):
            self.infra_failures = 0
            if self.finish(job, JobStatus.DONE, outcome):
                self.record_stats(outcome, time.monotonic() - t0)
        else:
            if device_fault(outcome):
                self.infra_failures += 1
                if self.infra_failures >= self.s.quarantine_after and self.device == "cuda":
                    self.quarantine()
            self.finish(job, JobStatus.FAILED, error=outcome)
        log.info("evaluation finished", extra={"evaluation_id": job_id, "cancelled": cancelled})

    def evaluate(self, job: JobRecord) -> EvalResult | str:
        options = job.request.options.model_copy(update={"device": self.device})
        problem = Problem(id=job.problem, source=job.reference_source)
        try:
            return self.evaluator.evaluate(problem, job.request.candidate, options, self.timings)
        except EvaluationError as exc:
            return f"the service could not evaluate this request: {exc}"
        except SoftTimeLimitExceeded:
            self.evaluator.cancel()
            return self.crashed(job, f"The evaluation exceeded the task limit of {self.s.task_time_limit_s} s.")

    def _watch_cancel(self, key: str) -> None:
        while self.current is not None:
            try:
                if self.r.hget(key, "cancel") == b"1":
                    self.evaluator.cancel()
                    return
            except redis.RedisError:
                pass
            time.sleep(0.25)

    def crashed(self, job: JobRecord, text: str) -> EvalResult:
        return EvalResult(
            problem=job.problem,
            verdict=Verdict.CRASHED,
            compiled=False,
            correct=False,
            timing_meaningful=False,
            feedback=text,
            environment=environment(self.device, "unknown"),
        )

    def finish(
        self, job: JobRecord, status: JobStatus, result: EvalResult | None = None, error: str | None = None
    ) -> bool:
        """The one transition to a final status; False when another delivery got there first."""
        keys, args = finish_call(
            self.keys,
            job,
            status,
            time.time(),
            self.s.job_ttl_s,
            result.model_dump_json() if result else "",
            error or "",
        )
        done = self.finish_script(keys=keys, args=args)
        return bool(done)

    def record_stats(self, result: EvalResult, seconds: float) -> None:
        pipe = self.r.pipeline()
        pipe.hincrby(self.keys.verdicts(), result.verdict.value, 1)
        bucket = next((str(b) for b in DURATION_BUCKETS if seconds <= b), "+Inf")
        pipe.hincrby(self.keys.durations(), bucket, 1)
        pipe.hincrbyfloat(self.keys.durations(), "sum", seconds)
        pipe.execute()

    def quarantine(self) -> None:
        """Repeated infrastructure failures on this GPU: stop taking work and say so in the heartbeat."""
        self.quarantined = True
        log.error("GPU quarantined after %d consecutive failures", self.infra_failures)
        for queue in self.keys.queues(self.s.device_class):
            app.control.cancel_consumer(queue, destination=[self.node])


_state: WorkerState | None = None


@worker_process_init.connect
def _start(**_: object) -> None:
    global _state
    _state = WorkerState(settings, EvalSettings())


@worker_process_shutdown.connect
def _stop(**_: object) -> None:
    if _state is not None:
        _state.close()


@app.task(name=TASK_NAME, bind=True)
def evaluate(self, job_id: str) -> None:
    if _state is None:  # a pool without worker_process_init (not used by `kernelgym worker`)
        raise RuntimeError("worker state not initialised")
    _state.run(job_id, self.request.hostname or "")
