"""The FastAPI application: thin routes over the job store, the queue and the problem set."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import redis.asyncio as aioredis
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response, status
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gym_api.metrics import Metrics
from gym_api.models import BatchBody, BatchResult, ErrorBody, EvaluateBody, Evaluation, ProblemInfo
from gym_api.security import enforce_rate, owner_of
from gym_api.store import JobStore, Waiters
from gym_common.jobs import FINAL, TASK_NAME, JobRecord, JobStatus, Keys, Submission
from gym_common.queue import make_celery
from gym_common.settings import ServiceSettings
from services.problems import Problem, ProblemError, ProblemSet, bundled_problems, check_reference_source
from services.schema import MAX_SOURCE_BYTES, PROTOCOL_VERSION

log = logging.getLogger("kernelgym.gateway")


class BodyLimit:
    """Refuses bodies over a byte limit (413) before they are read into memory, chunked ones included."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = f'{{"detail":"request body larger than {self.max_bytes} bytes"}}'.encode()
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


class Gateway:
    """What the routes share; one per application."""

    def __init__(self, settings: ServiceSettings):
        self.s = settings
        self.keys = Keys(settings.key_prefix)
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=settings.redis_max_connections,
            timeout=20,
            socket_timeout=10,
            socket_connect_timeout=5,
        )
        self.r = aioredis.Redis(connection_pool=pool)
        self.store = JobStore(self.r, self.keys, settings.job_ttl_s, settings.cache_ttl_s)
        self.waiters = Waiters(self.r, self.keys)
        self.celery = make_celery(settings)
        self.problems: ProblemSet = ProblemSet(settings.problems_dir) if settings.problems_dir else bundled_problems()
        self.metrics = Metrics()
        self._problems: dict[str, Problem] = {}

    def problem(self, problem_id: str) -> Problem:
        """A problem of the set, read and checked once per process (sets change only with a deployment)."""
        if problem_id not in self._problems:
            self._problems[problem_id] = self.problems.load(problem_id)
        return self._problems[problem_id]

    def resolve(self, body: EvaluateBody) -> tuple[str, str]:
        """(problem name, reference source) of a submission; 404/422 for an unknown or unusable reference."""
        if body.problem_id is not None:
            try:
                problem = self.problem(body.problem_id)
            except ProblemError as exc:
                raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
            return problem.id, problem.source
        try:
            check_reference_source(body.reference or "", "reference")
        except ProblemError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
        return "reference", body.reference or ""

    def job_for(self, body: EvaluateBody, owner: str) -> JobRecord:
        device_class = body.device_class or self.s.default_device_class
        device = "cpu" if device_class == "cpu" else "cuda"
        if body.options.device not in (None, device):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"options.device {body.options.device!r} does not match device_class {device_class!r}",
            )
        options = body.options.model_copy(update={"device": device})
        problem, reference = self.resolve(body)
        submission = Submission(
            candidate=body.candidate,
            reference=reference,
            options=options.model_dump(mode="json"),
            device_class=device_class,
        )
        request = body.model_dump(include={"candidate", "reference", "problem_id"})
        return JobRecord(
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

    async def submit(self, body: EvaluateBody, owner: str, idempotency_key: str | None) -> Evaluation:
        if idempotency_key:
            earlier = await self.store.by_idempotency_key(owner, idempotency_key)
            if earlier is not None:
                return Evaluation.of(earlier, cached=True)
        job = self.job_for(body, owner)
        if not body.force and self.s.cache_ttl_s:
            hit = await self.store.cached(job.cache_key)
            if hit is not None:
                return Evaluation.of(hit, cached=True)
        if await self.store.active_count(owner) >= self.s.max_queued_per_key:
            raise HTTPException(
                status.HTTP_429_TOO_MANY_REQUESTS,
                f"this API key already has {self.s.max_queued_per_key} unfinished evaluations",
            )
        await self.store.create(job, idempotency_key)
        try:
            await run_in_threadpool(
                self.celery.send_task,
                TASK_NAME,
                args=[job.id],
                task_id=job.id,
                queue=self.keys.queue(job.device_class, job.priority),
            )
        except Exception as exc:
            await self.store.finish(job, JobStatus.FAILED, f"could not enqueue: {exc}")
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the queue is unavailable") from None
        log.info("evaluation queued", extra={"evaluation_id": job.id, "owner": owner, "problem": job.problem})
        return Evaluation.of(job)

    async def settle(self, evaluation: Evaluation, wait: float) -> Evaluation:
        if wait <= 0 or evaluation.status in FINAL:
            return evaluation
        job = await self.waiters.wait(self.store, evaluation.id, wait)
        return Evaluation.of(job, cached=evaluation.cached) if job else evaluation


def _reply(evaluation: Evaluation) -> JSONResponse:
    code = status.HTTP_200_OK if evaluation.status in FINAL else status.HTTP_202_ACCEPTED
    return JSONResponse(evaluation.model_dump(mode="json"), status_code=code)


async def caller(request: Request) -> str:
    """The authenticated owner of the request, counted against its rate limit."""
    gw: Gateway = request.app.state.gateway
    owner = owner_of(request, gw.s)
    await enforce_rate(gw.r, gw.keys, owner, gw.s.rate_limit_per_minute)
    return owner


Owner = Annotated[str, Depends(caller)]
Wait = Annotated[float | None, Query(ge=0, description="Seconds to wait for the result (capped).")]

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    404: {"model": ErrorBody},
    413: {"model": ErrorBody},
    429: {"model": ErrorBody},
    503: {"model": ErrorBody},
}


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or ServiceSettings()
    gw = Gateway(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await gw.waiters.start()
        try:
            yield
        finally:
            await gw.waiters.stop()
            await gw.r.aclose()

    app = FastAPI(
        title="KernelGym",
        version=PROTOCOL_VERSION,
        description="Evaluate GPU kernels against PyTorch references: correctness, timing and reward-hacking "
        "defences, as a service.",
        lifespan=lifespan,
    )
    app.state.gateway = gw
    app.middleware("http")(gw.metrics.middleware)
    # Two full sources per item plus JSON overhead.
    app.add_middleware(BodyLimit, max_bytes=settings.batch_max * (2 * MAX_SOURCE_BYTES + 8192))

    def wait_for(wait: float | None, default: float) -> float:
        return min(default if wait is None else wait, settings.wait_max_s)

    @app.post("/evaluate", response_model=Evaluation, responses={202: {"model": Evaluation}, **ERRORS})
    async def evaluate(
        body: EvaluateBody,
        owner: Owner,
        wait: Wait = None,
        idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
    ) -> JSONResponse:
        """Submit one kernel. Answers 200 with the result if it is ready within `wait` seconds, else 202 with
        the evaluation's id and `status_url`."""
        evaluation = await gw.submit(body, owner, idempotency_key)
        return _reply(await gw.settle(evaluation, wait_for(wait, settings.wait_default_s)))

    @app.post("/evaluate/batch", response_model=BatchResult, responses=ERRORS)
    async def evaluate_batch(body: BatchBody, owner: Owner, wait: Wait = None) -> BatchResult:
        """Submit many kernels at once; they run in parallel across workers. Waits up to `wait` seconds
        (default 0) for all of them."""
        if len(body.items) > settings.batch_max:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, f"a batch holds at most {settings.batch_max} items"
            )
        submitted = [await gw.submit(item, owner, None) for item in body.items]
        budget = wait_for(wait, 0.0)
        settled = await asyncio.gather(*(gw.settle(e, budget) for e in submitted))
        return BatchResult(evaluations=list(settled))

    @app.get("/evaluations/{evaluation_id}", response_model=Evaluation, responses=ERRORS)
    async def get_evaluation(evaluation_id: str, _: Owner, wait: Wait = None) -> JSONResponse:
        """An evaluation's status, and its result once done; `wait` long-polls for completion."""
        job = await gw.store.get(evaluation_id)
        if job is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no evaluation {evaluation_id} (unknown or expired)")
        return _reply(await gw.settle(Evaluation.of(job), wait_for(wait, 0.0)))

    @app.delete("/evaluations/{evaluation_id}", response_model=Evaluation, responses=ERRORS)
    async def cancel_evaluation(evaluation_id: str, owner: Owner) -> JSONResponse:
        """Cancel: a queued evaluation never runs; a running one is stopped (202 until its worker confirms)."""
        job = await gw.store.get(evaluation_id)
        if job is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no evaluation {evaluation_id} (unknown or expired)")
        if job.owner != owner:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "only the API key that submitted it may cancel it")
        if job.status not in FINAL:
            job = await gw.store.request_cancel(job)
        return _reply(Evaluation.of(job))

    @app.get("/problems", response_model=list[ProblemInfo])
    async def list_problems(_: Owner) -> list[ProblemInfo]:
        return [ProblemInfo(id=i) for i in gw.problems.ids()]

    @app.get("/problems/{problem_id:path}", response_model=ProblemInfo, responses=ERRORS)
    async def get_problem(problem_id: str, _: Owner) -> ProblemInfo:
        try:
            problem = gw.problem(problem_id)
        except ProblemError as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
        return ProblemInfo(id=problem.id, source=problem.source)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        """Ready when Redis answers and at least one worker that is not quarantined has a fresh heartbeat."""
        try:
            await gw.r.ping()
            await gw.metrics.cluster.refresh(gw.r, gw.keys, [settings.default_device_class])
        except Exception as exc:
            return JSONResponse({"ready": False, "redis": f"unreachable: {exc}"}, status_code=503)
        workers = gw.metrics.cluster.snapshot["workers"]
        healthy = [w for w in workers if w.get("quarantined") != "1"]
        quarantined = [w for w in workers if w.get("quarantined") == "1"]
        body = {
            "ready": bool(healthy),
            "redis": "ok",
            "workers": len(healthy),
            "quarantined": len(quarantined),
            "device_classes": sorted({w.get("device_class", "") for w in healthy}),
        }
        return JSONResponse(body, status_code=200 if healthy else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        try:
            await gw.metrics.cluster.refresh(gw.r, gw.keys, [settings.default_device_class])
        except Exception as exc:
            log.warning("metrics: Redis unavailable: %s", exc)
        return Response(gw.metrics.render(), media_type="text/plain; version=0.0.4")

    return app
