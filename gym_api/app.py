"""The FastAPI application: thin routes over the job store, the queue and the problem set."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse, PlainTextResponse

from gym_api import guard
from gym_api.gateway import Gateway, ItemError, evaluation
from gym_api.metrics import slot_counts, worker_nodes
from gym_api.models import (
    BatchBody,
    BatchResult,
    ErrorBody,
    EvaluateBody,
    Evaluation,
    ProblemInfo,
    Readiness,
    ValidationErrorBody,
)
from gym_api.security import enforce_rate, owner_of
from gym_api.store import IdempotencyConflict, Tracked, body_digest
from gym_common.settings import ServiceSettings
from services.schema import MAX_SOURCE_BYTES, PROTOCOL_VERSION

log = logging.getLogger("kernelgym.gateway")

# One submission: two full sources plus room for JSON escaping and the options.
ITEM_MAX_BYTES = 2 * MAX_SOURCE_BYTES + 64 * 1024
# Requests without a body of their own (GET, DELETE, unknown routes).
OTHER_MAX_BYTES = 16 * 1024


def _reply(tracked: Tracked) -> JSONResponse:
    code = status.HTTP_200_OK if tracked.final else status.HTTP_202_ACCEPTED
    return JSONResponse(evaluation(tracked).model_dump(mode="json"), status_code=code)


async def caller(request: Request) -> str:
    """The authenticated owner of the request, counted against its rate limit."""
    gw: Gateway = request.app.state.gateway
    owner = owner_of(request, gw.s)
    await enforce_rate(gw.r, gw.keys, owner, gw.s.rate_limit_per_minute)
    return owner


Owner = Annotated[str, Depends(caller)]
Wait = Annotated[float | None, Query(ge=0, description="Seconds to wait for the result (capped).")]
EvaluationId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="A submission's id.")]


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of a route: every authenticated route can answer 401, 413 (a body over its
    limit), 422, 429 and 503 (Redis unavailable); `codes` adds its own."""
    out: dict[int | str, dict[str, Any]] = {c: {"model": ErrorBody} for c in sorted({401, 413, 429, 503, *codes})}
    return out | {422: {"model": ValidationErrorBody}}


# Routes that take a JSON body: 400 for a body that is not JSON text, 415 for another content type.
BODY_ERRORS = (400, 415)


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or ServiceSettings()
    gw = Gateway(settings)
    body_limits = {
        ("POST", "/evaluate"): ITEM_MAX_BYTES,
        ("POST", "/evaluate/batch"): settings.batch_max * ITEM_MAX_BYTES,
    }

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await gw.waiters.start()
        await gw.sweeper.start()
        try:
            yield
        finally:
            await gw.sweeper.stop()
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
    app.add_middleware(guard.BodyRules, json_routes=body_limits, other_max_bytes=OTHER_MAX_BYTES)
    # Added last, so outermost: it also counts what BodyRules refuses (413, 415) before any route runs.
    app.middleware("http")(gw.metrics.middleware)
    guard.install(app, gw.r)

    def wait_for(wait: float | None, default: float) -> float:
        return min(default if wait is None else wait, settings.wait_max_s)

    @app.post(
        "/evaluate",
        response_model=Evaluation,
        responses={202: {"model": Evaluation}, **errors(*BODY_ERRORS, 404, 409)},
        max_body_size=body_limits["POST", "/evaluate"],
    )
    async def evaluate(
        body: EvaluateBody,
        owner: Owner,
        wait: Wait = None,
        idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
    ) -> JSONResponse:
        """Submit one kernel. Answers 200 with the result if it is ready within `wait` seconds, else 202 with
        the evaluation's id and `status_url`. A repeated `Idempotency-Key` with the same body returns the first
        submission; with another body, 409."""
        if not idempotency_key:
            (tracked,) = await gw.submit([body], owner, indexed=False)
            return _reply(await gw.settle(tracked, wait_for(wait, settings.wait_default_s)))
        digest = body_digest(body)
        try:
            earlier = await gw.store.claim_idempotency_key(owner, idempotency_key, digest)
        except IdempotencyConflict as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
        if earlier is not None:
            tracked = await gw.store.track(earlier, owner)
            if tracked is None:
                raise HTTPException(status.HTTP_404_NOT_FOUND, "this Idempotency-Key's evaluation has expired")
        else:
            try:
                (tracked,) = await gw.submit([body], owner, indexed=False)
            except BaseException:
                await gw.store.release_idempotency_key(owner, idempotency_key)
                raise
            await gw.store.complete_idempotency_key(owner, idempotency_key, digest, tracked.sub.id)
        return _reply(await gw.settle(tracked, wait_for(wait, settings.wait_default_s)))

    @app.post(
        "/evaluate/batch",
        response_model=BatchResult,
        responses=errors(*BODY_ERRORS, 404),
        max_body_size=body_limits["POST", "/evaluate/batch"],
    )
    async def evaluate_batch(body: BatchBody, owner: Owner, wait: Wait = None) -> BatchResult:
        """Submit many kernels at once: every item is checked first, then all are enqueued or none (an error
        names the items by index). They run in parallel across workers. Waits up to `wait` seconds (default 0)
        for all of them."""
        if len(body.items) > settings.batch_max:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, f"a batch holds at most {settings.batch_max} items"
            )
        submitted = await gw.submit(body.items, owner)
        budget = wait_for(wait, 0.0)
        settled = await asyncio.gather(*(gw.settle(t, budget) for t in submitted))
        return BatchResult(evaluations=[evaluation(t) for t in settled])

    @app.get("/evaluations/{evaluation_id}", response_model=Evaluation, responses=errors(404))
    async def get_evaluation(evaluation_id: EvaluationId, owner: Owner, wait: Wait = None) -> JSONResponse:
        """A submission's status, and its result once done; `wait` long-polls for completion."""
        tracked = await gw.store.track(evaluation_id, owner)
        if tracked is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no evaluation {evaluation_id} (unknown or expired)")
        return _reply(await gw.settle(tracked, wait_for(wait, 0.0)))

    @app.delete("/evaluations/{evaluation_id}", response_model=Evaluation, responses=errors(404))
    async def cancel_evaluation(evaluation_id: EvaluationId, owner: Owner) -> JSONResponse:
        """Cancel a submission. Its evaluation stops once no other submission wants it: a queued one never
        runs, a running one is killed by its worker."""
        tracked = await gw.store.track(evaluation_id, owner)
        if tracked is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no evaluation {evaluation_id} (unknown or expired)")
        if not tracked.final:
            tracked = await gw.store.withdraw(tracked)
        return _reply(tracked)

    @app.get("/problems", response_model=list[ProblemInfo], responses=errors())
    async def list_problems(_: Owner) -> list[ProblemInfo]:
        return [ProblemInfo(id=i) for i in sorted(gw.problem_ids)]

    @app.get("/problems/{problem_id:path}", response_model=ProblemInfo, responses=errors(404))
    async def get_problem(problem_id: str, _: Owner) -> ProblemInfo:
        try:
            problem = gw.problem(problem_id)
        except ItemError as exc:
            raise HTTPException(exc.status_code, exc.message) from None
        return ProblemInfo(id=problem.id, source=problem.source)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
    async def readyz() -> JSONResponse:
        """Ready when Redis answers and at least one worker that is not quarantined has a fresh heartbeat."""
        try:
            await gw.r.ping()
            await gw.metrics.cluster.refresh(gw.r, gw.keys, gw.always_accepted())
        except Exception as exc:  # the address and the error go to the log, not to an unauthenticated caller
            log.warning("readyz: Redis unavailable: %s: %s", type(exc).__name__, exc)
            return JSONResponse({"ready": False, "redis": "unreachable"}, status_code=503)
        snapshot = gw.metrics.cluster.snapshot
        nodes = worker_nodes(snapshot["workers"]).values()
        healthy = [dc for dc, quarantined in nodes if not quarantined]
        serving = set(healthy)
        body = {
            "ready": bool(healthy),
            "redis": "ok",
            "workers": len(healthy),
            "quarantined": len(nodes) - len(healthy),
            # Evaluations the healthy workers run at once (their pool processes).
            "evaluation_slots": sum(
                n for (_, quarantined), n in slot_counts(snapshot["workers"]).items() if not quarantined
            ),
            "device_classes": sorted(serving),
            "queued": snapshot["queued"],
            # Evaluations that wait for a class no healthy worker serves now.
            "unserved": {dc: n for dc, n in snapshot["queued"].items() if n and dc not in serving},
        }
        return JSONResponse(body, status_code=200 if healthy else 503)

    @app.get("/metrics", response_class=PlainTextResponse, responses={200: {"content": {"text/plain": {}}}})
    async def metrics() -> Response:
        try:
            await gw.metrics.cluster.refresh(gw.r, gw.keys, gw.always_accepted())
        except Exception as exc:
            log.warning("metrics: Redis unavailable: %s", exc)
        return Response(gw.metrics.render(), media_type="text/plain; version=0.0.4")

    return app
