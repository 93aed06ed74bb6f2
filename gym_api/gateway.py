"""What the routes share: validation of submissions, their admission (all of a request or none of it), and the
reading and waiting that answer them."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from starlette.concurrency import run_in_threadpool

from gym_api.errors import RETRY_AFTER_S, GatewayError, NotFound, Throttled, Unavailable, Unprocessable
from gym_api.metrics import Metrics
from gym_api.models import EvaluateBody, Evaluation
from gym_api.store import JobStore, Tracked, Waiters
from gym_api.sweeper import Sweeper
from gym_common.connections import async_retry
from gym_common.jobs import TASK_NAME, JobRecord, JobStatus, Keys, Submission
from gym_common.queue import make_celery
from gym_common.settings import ServiceSettings
from services.problems import Problem, ProblemError, ProblemSet, bundled_problems, check_reference_source

log = logging.getLogger("kernelgym.gateway")

# How many item errors one answer lists.
ERRORS_LISTED = 10
# How often a submission for a class without a known worker may trigger a new look at the heartbeats.
CLASS_RESCAN_S = 2.0


@dataclass(frozen=True)
class Planned:
    body: EvaluateBody
    job: JobRecord


def _short(value: str, limit: int = 80) -> str:
    """A caller's string for an error message: quoted, control characters escaped, cut to `limit`."""
    text = repr(value[:limit])
    return text + " (cut)" if len(value) > limit else text


class Gateway:
    """One per application."""

    def __init__(self, settings: ServiceSettings):
        self.s = settings
        self.keys = Keys(settings.key_prefix)
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=settings.redis_max_connections,
            timeout=20,
            socket_timeout=10,
            socket_connect_timeout=5,
            retry=async_retry(),
        )
        self.r = aioredis.Redis(connection_pool=pool)
        self.store = JobStore(self.r, self.keys, settings.job_ttl_s, settings.cache_ttl_s)
        self.waiters = Waiters(self.r, self.keys)
        self.sweeper = Sweeper(self.r, self.store, self.send, settings.heartbeat_s)
        self.celery = make_celery(settings)
        self.problems: ProblemSet = ProblemSet(settings.problems_dir) if settings.problems_dir else bundled_problems()
        # Sets change only with a deployment: ids are listed once, problems read and checked once per process.
        self.problem_ids = frozenset(self.problems.ids())
        self.metrics = Metrics()
        self._problems: dict[str, Problem] = {}
        self._classes_scanned = 0.0

    # -- problems and device classes --------------------------------------------------------------------
    def problem(self, problem_id: str) -> Problem:
        """A problem of the set; NotFound for any other id (the set's location on the server is not revealed)."""
        if problem_id not in self.problem_ids:
            raise NotFound(f"unknown problem id {_short(problem_id)} (GET /problems)")
        if problem_id not in self._problems:
            self._problems[problem_id] = self.problems.load(problem_id)
        return self._problems[problem_id]

    def always_accepted(self) -> set[str]:
        return {self.s.default_device_class, *self.s.device_classes}

    async def served_classes(self, rescan: bool) -> set[str]:
        """Device classes some worker served within the job TTL, as recorded from heartbeats; with `rescan`,
        first record the heartbeats of now (at most every CLASS_RESCAN_S)."""
        if rescan and time.monotonic() - self._classes_scanned > CLASS_RESCAN_S:
            self._classes_scanned = time.monotonic()
            await self.metrics.cluster.refresh(self.r, self.keys, self.always_accepted())
        seen = await self.r.hgetall(self.keys.device_classes())
        horizon = time.time() - self.s.job_ttl_s
        return {k.decode() for k, v in seen.items() if float(v) >= horizon}

    async def check_device_class(self, device_class: str) -> None:
        if device_class in self.always_accepted() or device_class in await self.served_classes(rescan=True):
            return
        live = sorted({w.get("device_class", "") for w in self.metrics.cluster.snapshot.get("workers", [])} - {""})
        raise Unprocessable(
            f"no worker serves device class {device_class!r}; live classes: {', '.join(live) or 'none'}"
            " (the operator lists classes accepted without a live worker in KERNELGYM_DEVICE_CLASSES)",
        )

    # -- validation -------------------------------------------------------------------------------------
    def resolve(self, body: EvaluateBody) -> tuple[str, str]:
        """(problem name, reference source) of a submission."""
        if body.problem_id is not None:
            problem = self.problem(body.problem_id)
            return problem.id, problem.source
        try:
            check_reference_source(body.reference or "", "reference")
        except ProblemError as exc:
            raise Unprocessable(str(exc)) from None
        return "reference", body.reference or ""

    async def check_paused(self, owner: str) -> None:
        """Refuse every inline reference, before it is even parsed, while the key is paused for failing ones
        (gym_common.failed_references)."""
        left = await self.r.ttl(self.keys.reference_pause(owner))
        if left > 0:
            raise Throttled(
                f"this API key's inline references failed too often; it may send one again in {left} s "
                "(the problems of GET /problems are not paused)",
                left,
            )

    async def check_reference(self, owner: str, device_class: str, reference: str) -> None:
        """Refuse at once an inline reference that failed for this key on this class."""
        mark = self.keys.failed_reference(owner, device_class, Problem(id="reference", source=reference).digest)
        async with self.r.pipeline(transaction=False) as pipe:
            reason, left = await pipe.get(mark).ttl(mark).execute()
        if reason is not None:
            raise Unprocessable(
                f"this reference failed on {device_class} ({reason.decode(errors='replace')}); it is refused for "
                f"{max(1, left)} s more: fix it and send the fixed source",
            )

    async def plan(self, body: EvaluateBody, owner: str) -> Planned:
        device_class = body.device_class or self.s.default_device_class
        device = "cpu" if device_class == "cpu" else "cuda"
        if body.options.device not in (None, device):
            raise Unprocessable(
                f"options.device {body.options.device!r} does not match device_class {device_class!r}",
            )
        await self.check_device_class(device_class)
        options = body.options.model_copy(update={"device": device})
        if body.problem_id is None:
            await self.check_paused(owner)
        problem, reference = self.resolve(body)
        if body.problem_id is None:
            await self.check_reference(owner, device_class, reference)
        submission = Submission(
            candidate=body.candidate,
            reference=reference,
            options=options.model_dump(mode="json"),
            device_class=device_class,
        )
        request = body.model_dump(include={"candidate", "reference", "problem_id"})
        job = JobRecord(
            id=self.store.new_id(),
            status=JobStatus.QUEUED,
            owner=owner,
            device_class=device_class,
            priority=body.priority,
            cache_key=submission.cache_key(),
            request={**request, "options": options},
            problem=problem,
            reference_source=reference,
            created=time.time(),
        )
        return Planned(body, job)

    async def plan_all(self, bodies: list[EvaluateBody], owner: str, indexed: bool) -> list[Planned]:
        """Every item checked before anything is admitted; one refusal names every unusable item (by index when
        `indexed`), of the kind of the first."""
        planned, errors = [], []
        for i, body in enumerate(bodies):
            try:
                planned.append(await self.plan(body, owner))
            except GatewayError as exc:
                errors.append((i, exc))
        if not errors:
            return planned
        first = errors[0][1]
        if not indexed:
            raise first
        listed = [f"items[{i}]: {exc.detail}" for i, exc in errors[:ERRORS_LISTED]]
        if len(errors) > ERRORS_LISTED:
            listed.append(f"and {len(errors) - ERRORS_LISTED} more")
        raise first.restated("nothing was submitted; " + "; ".join(listed))

    # -- admission --------------------------------------------------------------------------------------
    async def submit(self, bodies: list[EvaluateBody], owner: str, indexed: bool = True) -> list[Tracked]:
        """Admit every item or none: validate all, reuse identical evaluations (cached, or earlier in the same
        request), check the key's limit for the new ones, record all in one transaction, then enqueue."""
        planned = await self.plan_all(bodies, owner, indexed)
        plan: list[tuple[JobRecord, bool]] = []
        new_jobs: dict[str, JobRecord] = {}  # by cache key: an identical later item shares the job
        for p in planned:
            if not p.body.force and self.s.cache_ttl_s:
                if (same := new_jobs.get(p.job.cache_key)) is not None:
                    plan.append((same, True))
                    continue
                if (hit := await self.store.cached(p.job.cache_key)) is not None:
                    plan.append((hit, False))
                    continue
            plan.append((p.job, True))
            new_jobs[p.job.cache_key] = p.job
        fresh = {job.id: job for job, new in plan if new}
        tracked = await self.store.admit(owner, plan, self.s.max_queued_per_key)
        lost = [i for i, t in enumerate(tracked) if t is None]
        if lost:  # their shared job was cancelled or failed in between: give them their own (the request
            # was admitted within the limit as it stood; refusing them now would break all-or-nothing)
            again = [(planned[i].job, True) for i in lost]
            for i, t in zip(lost, await self.store.admit(owner, again, None), strict=True):
                tracked[i] = t
            fresh.update((planned[i].job.id, planned[i].job) for i in lost)
        admitted = [t for t in tracked if t is not None]
        await self.enqueue(list(fresh.values()), admitted)
        return admitted

    async def enqueue(self, jobs: list[JobRecord], admitted: list[Tracked]) -> None:
        """Send the new jobs' tasks; if any send fails, withdraw the whole request (Unavailable)."""
        try:
            for job in jobs:
                await self.send(job)
        except Exception as exc:
            log.error("could not enqueue: %s", exc)
            for job in jobs:  # a message that did get through finds its job final and is skipped
                await self.store.finish(job, JobStatus.FAILED, "could not enqueue")
            for t in admitted:
                await self.store.withdraw(t)
            raise Unavailable("the queue is unavailable; nothing was submitted", RETRY_AFTER_S) from None
        for job in jobs:
            log.info("evaluation queued", extra={"evaluation_id": job.id, "owner": job.owner, "problem": job.problem})

    async def send(self, job: JobRecord) -> None:
        """The job's Celery message (its id only), on its class's queue for its priority."""
        await run_in_threadpool(
            self.celery.send_task,
            TASK_NAME,
            args=[job.id],
            task_id=job.id,
            queue=self.keys.queue(job.device_class, job.priority),
        )

    # -- answers ----------------------------------------------------------------------------------------
    async def settle(self, tracked: Tracked, wait: float) -> Tracked:
        """The submission once final, or as it stands after `wait` seconds."""
        if wait <= 0 or tracked.final:
            return tracked

        async def read() -> tuple[Tracked, bool]:
            now = await self.store.track(tracked.sub.id, tracked.sub.owner)
            return (now, now.final) if now else (tracked, True)

        return await self.waiters.wait(tracked.job.id, wait, read)


def evaluation(tracked: Tracked) -> Evaluation:
    return Evaluation.of(tracked.sub, tracked.job)
