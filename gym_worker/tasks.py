"""The evaluation task. It supervises the kernel through the evaluation core's child processes, so it
always ends with an outcome, and it records that outcome exactly once in the job record.

Start a worker with `kernelgym worker` (which runs the Celery app of `worker_app`). Each prefork pool
process holds one `WorkerState` and runs one evaluation at a time; the worker's pool processes evaluate
side by side and take turns in the device's timing slot (services.device_lock).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import redis
from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import celeryd_init, worker_process_init, worker_process_shutdown

from gym_common.connections import sync_retry
from gym_common.failed_references import RECORD_SCRIPT, record_call, short_reason
from gym_common.jobs import DURATION_BUCKETS, FINAL, FINISH_SCRIPT, TASK_NAME, JobRecord, JobStatus, Keys, finish_call
from gym_common.leases import CLAIM_SCRIPT, RELEASE_SCRIPT, lease_s
from gym_common.queue import make_celery
from gym_common.settings import ServiceSettings
from gym_worker.health import DeviceHealth, probe
from gym_worker.store import RedisTimingStore, alive, persist
from services import (
    Diagnostics,
    EvalResult,
    EvalSettings,
    EvaluationCancelled,
    EvaluationError,
    Evaluator,
    InfrastructureFault,
    Problem,
    ReferenceFailed,
    TimingSlot,
    Verdict,
    environment,
)

log = logging.getLogger("kernelgym.worker")
T = TypeVar("T")
node = ""  # this worker's Celery node name, set in the main process before it forks the pool


def timing_figures(result: EvalResult) -> dict[str, object]:
    """Why an evaluation held the timing slot as long as it did: the timed calls per side, the precision they
    reached, and whether the stored reference timing was reused (otherwise it was timed in several processes)."""
    sides = {"candidate": result.candidate_runtime, "reference": result.reference_runtime}
    return {
        "timed_calls": {side: stats.trials for side, stats in sides.items() if stats},
        "ci95_rel_halfwidth": {side: stats.ci95_rel_halfwidth for side, stats in sides.items() if stats},
        "timings_from_cache": result.timings_from_cache,
    }


def precompile_figures(diagnostics: Diagnostics) -> dict[str, object]:
    """What the compiler child compiled for the candidate's first call (services.parent.precompile), if it ran."""
    outcome = diagnostics.precompile
    return {"precompile": dataclasses.asdict(outcome)} if outcome is not None else {}


class WorkerState:
    """What one worker process holds between tasks: its Redis client, warm evaluator and health."""

    def __init__(self, app: Celery, service: ServiceSettings, eval_settings: EvalSettings):
        self.app = app
        self.s = service
        self.r = redis.Redis.from_url(service.redis_url, retry=sync_retry())
        self.keys = Keys(service.key_prefix)
        self.finish_script = self.r.register_script(FINISH_SCRIPT)
        self.device = service.evaluation_device()
        self.name = f"{service.device_class}@{socket.gethostname()}:{os.getpid()}"
        device_id = service.worker_device_id or self.device
        lock = Path(service.gpu_lock_dir) / f"{device_id}.lock"
        self.evaluator = Evaluator(eval_settings.model_copy(update={"device_lock": str(lock)}))
        slot = self.evaluator.timing_slot
        assert slot is not None  # made from the device_lock just set
        self.slot: TimingSlot = slot
        ttl = service.reference_timing_ttl_s
        self.timings = RedisTimingStore(self.r, self.keys, ttl) if ttl > 0 else None
        self.evaluator.pool.prewarm(self.device)
        if self.device == "cuda" and eval_settings.precompile:
            self.evaluator.pool.prewarm("compiler")
        # The probe and the tasks share one evaluator, which runs one evaluation at a time.
        self._eval_lock = threading.Lock()
        marker = Path(service.gpu_lock_dir) / f"{device_id}.quarantined"
        self.health = DeviceHealth(service.quarantine_after, self._probe, marker)
        self.consuming = True
        self._consume_lock = threading.Lock()
        self._prober = threading.Thread()  # the running probe of a quarantined device, if any
        self.current: str | None = None
        self.leased: str | None = None  # the job whose lease the heartbeat renews
        self._lease = self.r.register_script(CLAIM_SCRIPT)
        self._release = self.r.register_script(RELEASE_SCRIPT)
        self.record_failed_reference = self.r.register_script(RECORD_SCRIPT)
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="kg-heartbeat", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        ttl = max(2, int(self.s.heartbeat_s * 3))
        while not self._stop.is_set():
            quarantined = self.follow_quarantine()
            try:
                self.r.hset(
                    self.keys.worker(self.name),
                    mapping={
                        "device_class": self.s.device_class,
                        "device": self.device,
                        "node": node,
                        "quarantined": "1" if quarantined else "0",
                        "current": self.current or "",
                        "warm_children": str(self.evaluator.pool.ready(self.device)),
                        "seen": repr(time.time()),
                    },
                )
                self.r.expire(self.keys.worker(self.name), ttl)
                if (leased := self.leased) is not None:
                    self.lease(leased)
            except redis.RedisError as exc:
                log.warning("heartbeat failed: %s", exc)
            self._stop.wait(self.s.heartbeat_s)

    def close(self) -> None:
        self._stop.set()
        self.evaluator.close()
        with contextlib.suppress(redis.RedisError):
            self.r.delete(self.keys.worker(self.name))

    # -- one job -------------------------------------------------------------------------------------
    def lease(self, job_id: str) -> bool:
        """Take or renew this process's lease on a job (gym_common.leases); False while another holds it."""
        keys = [self.keys.lease(job_id), self.keys.running()]
        ttl_ms = int(lease_s(self.s.heartbeat_s) * 1000)
        return bool(self._lease(keys=keys, args=[self.name, ttl_ms, repr(time.time()), job_id]))

    def take_over(self, job_id: str) -> bool:
        """Take the lease of a pool process of this host that is gone: Celery redelivers the task of a killed
        pool process at once, and waiting for its lease to lapse would only delay it. A lease of another host's
        process lapses, and a gateway then queues its job again (gym_common.leases)."""
        lease = self.keys.lease(job_id)
        holder = (self.r.get(lease) or b"").decode()
        host, _, pid = holder.partition("@")[2].rpartition(":")
        if host != socket.gethostname() or not pid.isdigit() or alive(int(pid)):
            return False
        self._release(keys=[lease], args=[holder])
        return self.lease(job_id)

    def run(self, job_id: str) -> None:
        """One delivery of a job: run it under a lease, unless it is final or another live process holds it. Until
        the lease is taken nothing would queue the job again, so an outage of Redis is waited out here as for an
        outcome: a delivery dropped on an error would leave its job queued with no message."""
        key = self.keys.job(job_id)

        def waiting(doing: str, call: Callable[[], T]) -> T:
            return persist(self.s.result_write_retry_s, job_id, call, doing)

        raw = waiting("reading the job", lambda: self.r.hgetall(key))
        if not raw:
            log.warning("job unknown or expired", extra={"evaluation_id": job_id})
            return
        job = JobRecord.from_hash(raw)
        if job.status in FINAL:  # a redelivery of a job another worker finished
            return
        if job.cancel_requested:
            waiting("storing the outcome", lambda: self.finish(job, JobStatus.CANCELLED))
            return
        # Taken over from a dead pool process of this host; refused while a live process holds it (a duplicate).
        if not waiting("taking the lease", lambda: self.lease(job_id) or self.take_over(job_id)):
            log.info("evaluation leased by another worker; delivery dropped", extra={"evaluation_id": job_id})
            return
        self.leased = job_id
        try:
            self.run_leased(job)
        finally:
            self.leased = None
            with contextlib.suppress(redis.RedisError):  # else it lapses, and the sweeper drops it
                self._release(keys=[self.keys.lease(job_id), self.keys.running()], args=[self.name, job_id])

    def run_leased(self, job: JobRecord) -> None:
        key = self.keys.job(job.id)
        attempts = self.r.hincrby(key, "attempts", 1)
        if attempts > self.s.max_attempts:
            text = (
                f"The candidate killed its worker process on each of {self.s.max_attempts} attempts "
                "(e.g. a crash that escaped the sandbox); it was not run again."
            )
            self.finish(job, JobStatus.DONE, self.crashed(job, text))
            return
        self.r.hset(key, mapping={"status": JobStatus.RUNNING.value, "started": repr(time.time()), "worker": self.name})
        log.info("evaluation started", extra={"evaluation_id": job.id, "attempt": attempts})
        self.current = job.id
        self.slot.reset()
        watcher = threading.Thread(target=self._watch_cancel, args=(key,), daemon=True)
        watcher.start()
        t0 = time.monotonic()
        try:
            outcome, diagnostics = self.evaluate(job)
        finally:
            self.current = None
        evaluated = time.monotonic()
        cancelled = persist(self.s.result_write_retry_s, job.id, lambda: self.r.hget(key, "cancel") == b"1")
        status, error = self.conclude(job, outcome, cancelled, evaluated - t0)
        seconds = {"evaluate_s": round(evaluated - t0, 3), "store_s": round(time.monotonic() - evaluated, 3)}
        self.log_finished(job, outcome, diagnostics, status, error, seconds)

    def conclude(
        self, job: JobRecord, outcome: EvalResult | EvaluationError, cancelled: bool, seconds: float
    ) -> tuple[JobStatus, str]:
        """Store the outcome, waiting out a Redis outage; returns the status and the reason of a failure."""

        def store(write: Callable[[], T]) -> T:
            return persist(self.s.result_write_retry_s, job.id, write)

        if cancelled:
            store(lambda: self.finish(job, JobStatus.CANCELLED))
            return JobStatus.CANCELLED, ""
        if isinstance(outcome, EvalResult):
            self.health.ok()
            result = outcome
            if store(lambda: self.finish(job, JobStatus.DONE, result)):
                store(lambda: self.record_stats(result, seconds))
            return JobStatus.DONE, ""
        reference_failed = isinstance(outcome, ReferenceFailed)
        if reference_failed:
            error = f"the reference failed: {outcome}"
        else:
            error = f"the service could not evaluate this request: {outcome}"
        if store(lambda: self.finish(job, JobStatus.FAILED, error=error)) and reference_failed:
            store(lambda: self.remember_failed_reference(job, str(outcome)))
        if isinstance(outcome, InfrastructureFault) and self.s.device_class != "cpu" and self.health.fault():
            self.follow_quarantine()
        return JobStatus.FAILED, error

    def remember_failed_reference(self, job: JobRecord, reason: str) -> None:
        """Inline references only (gym_common.failed_references): the problem set's own are the operator's."""
        if job.request.problem_id is not None:
            return
        digest = Problem(id=job.problem, source=job.reference_source).digest
        keys, args = record_call(self.keys, self.s, job.owner, job.device_class, digest, reason)
        if pause := self.record_failed_reference(keys=keys, args=args):
            log.warning("API key paused: its references keep failing", extra={"owner": job.owner, "pause_s": pause})

    def log_finished(
        self,
        job: JobRecord,
        outcome: EvalResult | EvaluationError,
        diagnostics: Diagnostics,
        status: JobStatus,
        error: str,
        seconds: dict[str, float],
    ) -> None:
        """`seconds`: in the evaluator (`evaluate_s`) and storing the outcome (`store_s`)."""
        level = logging.WARNING if status is JobStatus.FAILED else logging.INFO
        log.log(
            level,
            "evaluation finished",
            extra={
                "evaluation_id": job.id,
                "problem_id": job.problem,
                "status": status.value,
                **({"error": short_reason(error), "error_type": type(outcome).__name__} if error else {}),
                "verdict": outcome.verdict.value if isinstance(outcome, EvalResult) else None,
                "cancelled": status is JobStatus.CANCELLED,
                **seconds,
                "timing_slot_wait_s": round(self.slot.waited_s, 3),
                "timing_slot_held_s": round(self.slot.held_s, 3),
                "timing_slot_drain_s": round(self.slot.drained_s, 3),
                "gpu_wait_s": round(self.slot.shared_waited_s, 3),
                # the parts of the device's memory it held, the attempts it started again with more, the units it
                # kept for a new reference's further timing processes, the wait
                "memory_units": diagnostics.memory_units,
                "memory_retries": diagnostics.memory_retries,
                "memory_units_kept": diagnostics.memory_units_kept,
                "memory_wait_s": round(self.slot.memory_waited_s, 3),
                # its reference child had served an earlier evaluation of the problem (services.parent.references)
                "reference_kept": diagnostics.reference_kept,
                "longest_gpu_request": {
                    "s": round(self.slot.longest_shared[0], 3),
                    "what": self.slot.longest_shared[1],
                },
                "gpu_busy": [[round(a, 4), round(b, 4), what] for a, b, what in self.slot.busy],
                # the placements its sides were timed over, and this process's GPU children that started or ended
                # since the last evaluation ended, on the same clock
                "placement_windows": [
                    [side, round(a, 4), round(b, 4), round(ms, 5)] for side, a, b, ms in diagnostics.placement_windows
                ],
                "child_events": [[kind, round(a, 4), round(b, 4)] for kind, a, b in diagnostics.child_events],
                **(timing_figures(outcome) if isinstance(outcome, EvalResult) else {}),
                **precompile_figures(diagnostics),
                "requests": diagnostics.requests,
            },
        )

    def evaluate(self, job: JobRecord) -> tuple[EvalResult | EvaluationError, Diagnostics]:
        """The result, or the typed reason there is none (a cancelled evaluation is discarded by `run`), and how
        the evaluation ran (empty where the evaluator reported nothing: the task's time limit, a defect of ours)."""
        options = job.request.options.model_copy(update={"device": self.device})
        problem = Problem(id=job.problem, source=job.reference_source)
        try:
            with self._eval_lock:
                return self.evaluator.evaluate(problem, job.request.candidate, options, self.timings)
        except (ReferenceFailed, InfrastructureFault, EvaluationCancelled) as exc:
            return exc, exc.diagnostics or Diagnostics()
        except SoftTimeLimitExceeded:
            self.evaluator.cancel()
            text = f"The evaluation exceeded the task limit of {self.s.task_time_limit_s} s."
            return self.crashed(job, text), Diagnostics()
        except Exception as exc:  # a defect of ours: the job fails, the worker and its device go on
            log.exception("the evaluation raised in the worker", extra={"evaluation_id": job.id})
            return EvaluationError(f"internal error ({type(exc).__name__})"), Diagnostics()

    def _watch_cancel(self, key: str) -> None:
        while self.current is not None:
            try:
                if self.r.hget(key, "cancel") == b"1":
                    self.slot.cancel()
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

    def _probe(self) -> str | None:
        with self._eval_lock:
            return probe(self.evaluator, self.device)

    def follow_quarantine(self) -> bool:
        """The node consumes while the device is not quarantined, whichever process quarantined it; while it
        is, an idle process probes it (one process at a time, every `quarantine_probe_s`). True if quarantined."""
        quarantined = self.health.quarantined
        if quarantined and self.current is None and not self._prober.is_alive():
            self._prober = threading.Thread(target=self._reprobe, name="kg-reprobe", daemon=True)
            self._prober.start()
        self._consume(not quarantined)
        return quarantined

    def _reprobe(self) -> None:
        if self.health.recheck(self.s.quarantine_probe_s):
            self._consume(True)

    def _consume(self, wanted: bool) -> None:
        with self._consume_lock:
            if wanted == self.consuming:
                return
            self.consuming = wanted
            for queue in self.keys.queues(self.s.device_class):
                if wanted:
                    self.app.control.add_consumer(queue, destination=[node])
                else:
                    self.app.control.cancel_consumer(queue, destination=[node])


_state: WorkerState | None = None


@celeryd_init.connect
def _named(sender: str, **_: object) -> None:
    global node
    node = sender


@worker_process_shutdown.connect
def _stop(**_: object) -> None:
    if _state is not None:
        _state.close()


def evaluate(job_id: str) -> None:
    """The task: one delivery of a job, run by this pool process's state."""
    if _state is None:  # a pool without worker_process_init (not used by `kernelgym worker`)
        raise RuntimeError("worker state not initialised")
    _state.run(job_id)


def worker_app(service: ServiceSettings, eval_settings: EvalSettings) -> Celery:
    """The Celery app of `kernelgym worker`, with the settings its main process loaded: each pool process, forked
    from that process, builds its WorkerState from them when it starts, and reads no environment."""
    app = make_celery(service)
    app.task(name=TASK_NAME)(evaluate)

    def start(**_: object) -> None:
        global _state
        _state = WorkerState(app, service, eval_settings)

    worker_process_init.connect(start, weak=False)
    return app
