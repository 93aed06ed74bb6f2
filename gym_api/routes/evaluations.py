"""A submission's state, and its cancellation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from gym_api.deps import GatewayDep, Owner, SettingsDep
from gym_api.errors import NotFound
from gym_api.models import Evaluation
from gym_api.routes.answers import Wait, errors, reply, wait_for

EvaluationId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="A submission's id.")]

router = APIRouter()


@router.get("/evaluations/{evaluation_id}", response_model=Evaluation, responses=errors(404))
async def get_evaluation(
    evaluation_id: EvaluationId, owner: Owner, gw: GatewayDep, settings: SettingsDep, wait: Wait = None
) -> JSONResponse:
    """A submission's status, and its result once done; `wait` long-polls for completion."""
    tracked = await gw.store.track(evaluation_id, owner)
    if tracked is None:
        raise NotFound(f"no evaluation {evaluation_id} (unknown or expired)")
    return reply(await gw.settle(tracked, wait_for(wait, 0.0, settings)))


@router.delete("/evaluations/{evaluation_id}", response_model=Evaluation, responses=errors(404))
async def cancel_evaluation(evaluation_id: EvaluationId, owner: Owner, gw: GatewayDep) -> JSONResponse:
    """Cancel a submission. Its evaluation stops once no other submission wants it: a queued one never
    runs, a running one is killed by its worker."""
    tracked = await gw.store.track(evaluation_id, owner)
    if tracked is None:
        raise NotFound(f"no evaluation {evaluation_id} (unknown or expired)")
    if not tracked.final:
        tracked = await gw.store.withdraw(tracked)
    return reply(tracked)
