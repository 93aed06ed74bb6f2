"""The evaluation task. It supervises the kernel through the evaluation core's child processes, so it
always ends with an outcome, and it records that outcome exactly once in the job record.

Start a worker with `kernelgym worker` (which runs Celery with this module as its app). Each prefork pool
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
from pathlib import Path

import redis
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import celeryd_init, worker_process_init, worker_process_shutdown

from gym_common.jobs import DURATION_BUCKETS, FINAL, FINISH_SCRIPT, TASK_NAME, JobRecord, JobStatus, Keys, finish_call
from gym_common.queue import make_celery
from gym_common.settings import ServiceSettings
from gym_worker.health import DeviceHealth, probe
from gym_worker.run import worker_device
from services.device_lock import TimingSlot
from services.errors import EvaluationCancelled, EvaluationError, InfrastructureFault, ReferenceFailed
from services.evaluator import Evaluator, environment
from services.parent.precompile import PrecompileOutcome
from services.problems import Problem
from services.schema import EvalResult, Verdict
from services.settings import EvalSettings

log = logging.getLogger("kernelgym.worker")
settings = ServiceSettings()
app = make_celery(settings)
node = ""  # this worker's Celery node name, set in the main process before it forks the pool


# Take or renew a claim (KEYS[1]) for an owner (ARGV[1]) for ARGV[2] ms, unless another owner holds it.
_CLAIM = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
# Drop a claim only when the owner (ARGV[1]) holds it.
_UNCLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisTimingStore:
    """Reference timings shared by every worker of a device class (the key names the GPU and versions), and
    the claims that let one evaluation at a time time a reference (`services.timing_cache`).
    A Redis failure only costs a re-timing; it never fails the evaluation."""

    def __init__(self, r: redis.Redis, keys: Keys, ttl_s: int):
        self.r, self.keys, self.ttl_s = r, keys, ttl_s
        self._claim = r.register_script(_CLAIM)
        self._unclaim = r.register_script(_UNCLAIM)

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


def timing_figures(result: EvalResult) -> dict[str, object]:
    """Why an evaluation held the timing slot as long as it did: the timed calls per side, the precision they
    reached, and whether the stored reference timing was reused (otherwise it was timed in several processes)."""
    sides = {"candidate": result.candidate_runtime, "reference": result.reference_runtime}
    return {
        "timed_calls": {side: stats.trials for side, stats in sides.items() if stats},
        "ci95_rel_halfwidth": {side: stats.ci95_rel_halfwidth for side, stats in sides.items() if stats},
        "timings_from_cache": result.timings_from_cache,
    }


def precompile_figures(outcome: PrecompileOutcome | None) -> dict[str, object]:
    """What the compiler child compiled for the candidate's first call (services.parent.precompile), if it ran."""
    return {"precompile": dataclasses.asdict(outcome)} if outcome is not None else {}


class WorkerState:
    """What one worker process holds between tasks: its Redis client, warm evaluator and health."""

    def __init__(self, service: ServiceSettings, eval_settings: EvalSettings):
        self.s = service
        self.r = redis.Redis.from_url(service.redis_url)
        self.keys = Keys(service.key_prefix)
        self.finish_script = self.r.register_script(FINISH_SCRIPT)
        self.device = worker_device(service)
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
            except redis.RedisError as exc:
                log.warning("heartbeat failed: %s", exc)
            self._stop.wait(self.s.heartbeat_s)

    def close(self) -> None:
        self._stop.set()
        self.evaluator.close()
        with contextlib.suppress(redis.RedisError):
            self.r.delete(self.keys.worker(self.name))

    # -- one job -------------------------------------------------------------------------------------
    def run(self, job_id: str) -> None:
        """One delivery of a job."""
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
        self.slot.reset()
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
            self.health.ok()
            if self.finish(job, JobStatus.DONE, outcome):
                self.record_stats(outcome, time.monotonic() - t0)
        else:
            self.finish(job, JobStatus.FAILED, error=f"the service could not evaluate this request: {outcome}")
            if isinstance(outcome, InfrastructureFault) and self.s.device_class != "cpu" and self.health.fault():
                self.follow_quarantine()
        log.info(
            "evaluation finished",
            extra={
                "evaluation_id": job_id,
                "problem_id": job.problem,
                "cancelled": cancelled,
                "timing_slot_wait_s": round(self.slot.waited_s, 3),
                "timing_slot_held_s": round(self.slot.held_s, 3),
                "timing_slot_drain_s": round(self.slot.drained_s, 3),
                "gpu_wait_s": round(self.slot.shared_waited_s, 3),
                # ran out of device memory beside other evaluations and ran again with the device to itself
                "retried_alone": self.evaluator.last_retried_alone,
                # its problem had, in this process, so it started alone
                "started_alone": self.evaluator.last_started_alone,
                "alone_wait_s": round(self.slot.alone_waited_s, 3),
                # its reference child had served an earlier evaluation of the problem (services.parent.references)
                "reference_kept": self.evaluator.last_reference_kept,
                "longest_gpu_request": {
                    "s": round(self.slot.longest_shared[0], 3),
                    "what": self.slot.longest_shared[1],
                },
                **(timing_figures(outcome) if isinstance(outcome, EvalResult) else {}),
                **precompile_figures(self.evaluator.last_precompile),
                "requests": self.evaluator.last_requests,
            },
        )

    def evaluate(self, job: JobRecord) -> EvalResult | EvaluationError:
        """The result, or the typed reason there is none (a cancelled evaluation is discarded by `run`)."""
        options = job.request.options.model_copy(update={"device": self.device})
        problem = Problem(id=job.problem, source=job.reference_source)
        try:
            with self._eval_lock:
                return self.evaluator.evaluate(problem, job.request.candidate, options, self.timings)
        except (ReferenceFailed, InfrastructureFault, EvaluationCancelled) as exc:
            return exc
        except SoftTimeLimitExceeded:
            self.evaluator.cancel()
            return self.crashed(job, f"The evaluation exceeded the task limit of {self.s.task_time_limit_s} s.")
        except Exception as exc:  # a defect of ours: the job fails, the worker and its device go on
            log.exception("the evaluation raised in the worker", extra={"evaluation_id": job.id})
            return EvaluationError(f"internal error ({type(exc).__name__})")

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
                    app.control.add_consumer(queue, destination=[node])
                else:
                    app.control.cancel_consumer(queue, destination=[node])


_state: WorkerState | None = None


@celeryd_init.connect
def _named(sender: str, **_: object) -> None:
    global node
    node = sender


@worker_process_init.connect
def _start(**_: object) -> None:
    global _state
    _state = WorkerState(settings, EvalSettings())


@worker_process_shutdown.connect
def _stop(**_: object) -> None:
    if _state is not None:
        _state.close()


@app.task(name=TASK_NAME)
def evaluate(job_id: str) -> None:
    if _state is None:  # a pool without worker_process_init (not used by `kernelgym worker`)
        raise RuntimeError("worker state not initialised")
    _state.run(job_id)
