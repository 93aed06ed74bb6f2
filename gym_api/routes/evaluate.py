"""Submissions: one kernel, or a batch of them."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse

from gym_api.deps import GatewayDep, Owner, SettingsDep
from gym_api.errors import NotFound, Unprocessable
from gym_api.gateway import evaluation
from gym_api.models import BatchBody, BatchResult, EvaluateBody, Evaluation
from gym_api.routes.answers import BODY_ERRORS, Wait, errors, reply, wait_for
from gym_api.store import body_digest
from services.schema import MAX_SOURCE_BYTES

# One submission: two full sources plus room for JSON escaping and the options.
ITEM_MAX_BYTES = 2 * MAX_SOURCE_BYTES + 64 * 1024

# A batch body's limit follows KERNELGYM_BATCH_MAX, so `create_app` gives it where it includes this router;
# POST /evaluate has its own.
router = APIRouter()


@router.post(
    "/evaluate",
    response_model=Evaluation,
    responses={202: {"model": Evaluation}, **errors(*BODY_ERRORS, 404, 409)},
    max_body_size=ITEM_MAX_BYTES,
)
async def evaluate(
    body: EvaluateBody,
    owner: Owner,
    gw: GatewayDep,
    settings: SettingsDep,
    wait: Wait = None,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> JSONResponse:
    """Submit one kernel. Answers 200 with the result if it is ready within `wait` seconds, else 202 with
    the evaluation's id and `status_url`. A repeated `Idempotency-Key` with the same body returns the first
    submission; with another body, 409."""
    if not idempotency_key:
        (tracked,) = await gw.submit([body], owner, indexed=False)
        return reply(await gw.settle(tracked, wait_for(wait, settings.wait_default_s, settings)))
    digest = body_digest(body)
    earlier = await gw.store.claim_idempotency_key(owner, idempotency_key, digest)
    if earlier is not None:
        tracked = await gw.store.track(earlier, owner)
        if tracked is None:
            raise NotFound("this Idempotency-Key's evaluation has expired")
    else:
        try:
            (tracked,) = await gw.submit([body], owner, indexed=False)
        except BaseException:
            await gw.store.release_idempotency_key(owner, idempotency_key)
            raise
        await gw.store.complete_idempotency_key(owner, idempotency_key, digest, tracked.sub.id)
    return reply(await gw.settle(tracked, wait_for(wait, settings.wait_default_s, settings)))


@router.post("/evaluate/batch", response_model=BatchResult, responses=errors(*BODY_ERRORS, 404))
async def evaluate_batch(
    body: BatchBody, owner: Owner, gw: GatewayDep, settings: SettingsDep, wait: Wait = None
) -> BatchResult:
    """Submit many kernels at once: every item is checked first, then all are enqueued or none (an error
    names the items by index). They run in parallel across workers. Waits up to `wait` seconds (default 0)
    for all of them."""
    if len(body.items) > settings.batch_max:
        raise Unprocessable(f"a batch holds at most {settings.batch_max} items")
    submitted = await gw.submit(body.items, owner)
    budget = wait_for(wait, 0.0, settings)
    settled = await asyncio.gather(*(gw.settle(t, budget) for t in submitted))
    return BatchResult(evaluations=[evaluation(t) for t in settled])
