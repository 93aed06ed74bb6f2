"""What the routes' answers share: the documented error responses, the `wait` parameter and its bounds, and
the answer that carries one evaluation."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, status
from fastapi.responses import JSONResponse

from gym_api.gateway import evaluation
from gym_api.models import ErrorBody, ValidationErrorBody
from gym_api.store import Tracked
from gym_common.settings import ServiceSettings

# Routes that take a JSON body: 400 for a body that is not JSON text, 415 for another content type.
BODY_ERRORS = (400, 415)

Wait = Annotated[float | None, Query(ge=0, description="Seconds to wait for the result (capped).")]


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of a route: every authenticated route can answer 401, 413 (a body over its
    limit), 422, 429 and 503 (Redis unavailable); `codes` adds its own."""
    out: dict[int | str, dict[str, Any]] = {c: {"model": ErrorBody} for c in sorted({401, 413, 429, 503, *codes})}
    return out | {422: {"model": ValidationErrorBody}}


def wait_for(wait: float | None, default: float, settings: ServiceSettings) -> float:
    """How long a request waits: what it asked, else `default`, at most KERNELGYM_WAIT_MAX_S."""
    return min(default if wait is None else wait, settings.wait_max_s)


def reply(tracked: Tracked) -> JSONResponse:
    """200 with a final evaluation, 202 with one still queued or running."""
    code = status.HTTP_200_OK if tracked.final else status.HTTP_202_ACCEPTED
    return JSONResponse(evaluation(tracked).model_dump(mode="json"), status_code=code)
