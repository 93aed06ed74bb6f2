"""What every request passes before and after its route: JSON bodies only where a route takes one (415),
validation errors that never echo large input (422), 413s that name the limit, 503 with Retry-After while
Redis is unreachable, and the one place the gateway's refusals (gym_api.errors) become status codes."""

from __future__ import annotations

import logging
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.types import ASGIApp, Receive, Scope, Send

from gym_api.errors import (
    RETRY_AFTER_S,
    GatewayError,
    IdempotencyConflict,
    NotFound,
    Throttled,
    Unauthenticated,
    Unavailable,
    Unprocessable,
)

log = logging.getLogger("kernelgym.gateway")

# Redis errors that mean "not now" rather than a bug: the server is down, restarting, out of memory or a replica.
REDIS_UNAVAILABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
)
RETRY = {"Retry-After": str(RETRY_AFTER_S)}
# Each refusal's status code, found along its class's bases.
STATUS: dict[type[GatewayError], int] = {
    Unauthenticated: 401,
    NotFound: 404,
    IdempotencyConflict: 409,
    Unprocessable: 422,
    Throttled: 429,
    Unavailable: 503,
}
# A validation error shows the offending value only when it is a scalar this short.
ECHO_MAX_CHARS = 100
ECHO_MAX_ERRORS = 20
SEND_JSON = "send JSON (content-type: application/json)"


class BodyRules:
    """Refuse, before a byte of the body is read: a body on a route that takes JSON in another content type (or
    none) with 415, instead of a puzzling 422 about the body's type (what `curl -d` without a content-type gets),
    and a declared Content-Length over the route's limit with a JSON 413 that names the limit. Bodies streamed
    without a length meet the same limits as they arrive (FastAPI's per-route `max_body_size`)."""

    def __init__(self, app: ASGIApp, json_routes: dict[tuple[str, str], int], other_max_bytes: int):
        self.app = app
        self.json_routes = json_routes
        self.other_max_bytes = other_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            route = (scope["method"], scope["path"])
            limit = self.json_routes.get(route, self.other_max_bytes)
            length = _content_length(headers)
            if length is not None and length > limit:
                await _refuse(send, 413, too_large_detail(limit))
                return
            has_body = b"transfer-encoding" in headers or bool(length)
            if route in self.json_routes and has_body and not _is_json(headers.get(b"content-type", b"")):
                await _refuse(send, 415, SEND_JSON)
                return
        await self.app(scope, receive, send)


def too_large_detail(limit: int) -> str:
    return f"request body larger than {limit} bytes"


def _content_length(headers: dict[bytes, bytes]) -> int | None:
    try:
        return int(headers[b"content-length"])
    except (KeyError, ValueError):
        return None


def _is_json(content_type: bytes) -> bool:
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


async def _refuse(send: Send, code: int, detail: str) -> None:
    body = JSONResponse({"detail": detail}).body
    await send({"type": "http.response.start", "status": code, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def cannot_persist(r: aioredis.Redis) -> bool:
    """Whether Redis reports its last snapshot or append-only write failed (it then refuses writes)."""
    try:
        info = await r.info("persistence")
    except redis.exceptions.RedisError:
        return False
    return "err" in (info.get("rdb_last_bgsave_status"), info.get("aof_last_write_status"))


def _short(value: Any) -> Any:
    return value[:ECHO_MAX_CHARS] + "…" if isinstance(value, str) and len(value) > ECHO_MAX_CHARS else value


def compact(errors: Any) -> list[dict[str, Any]]:
    """Pydantic's errors without what the request put in them: no long input, no long key name in `loc`, at most
    ECHO_MAX_ERRORS of them (a 20 MB source, a 2 MB key or 10,000 unknown keys must not come back in a 422)."""
    errors = list(errors)
    out = []
    for error in errors[:ECHO_MAX_ERRORS]:
        loc = [_short(part) for part in error.get("loc", ())]
        item = {"loc": loc, "msg": str(error.get("msg", ""))[:500], "type": error.get("type")}
        value = error.get("input")
        if isinstance(value, int | float | bool) or (isinstance(value, str) and len(value) <= ECHO_MAX_CHARS):
            item["input"] = value
        out.append(item)
    if len(errors) > ECHO_MAX_ERRORS:
        more = len(errors) - ECHO_MAX_ERRORS
        out.append({"loc": [], "msg": f"and {more} more invalid field(s) not listed", "type": "too_many_errors"})
    return out


def install(app: FastAPI, r: aioredis.Redis) -> None:
    """The error handlers; `r` is asked whether a refused command means the store is unavailable."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": jsonable_encoder(compact(exc.errors()))}, status_code=422)

    @app.exception_handler(GatewayError)
    async def refused(request: Request, exc: GatewayError) -> JSONResponse:
        code = next(STATUS[c] for c in type(exc).__mro__ if c in STATUS)
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else {}
        if exc.retry_after_s is not None:
            headers["Retry-After"] = str(exc.retry_after_s)
        return JSONResponse({"detail": exc.detail}, status_code=code, headers=headers or None)

    async def redis_down(request: Request, exc: Exception) -> JSONResponse:
        log.warning("Redis unavailable: %s: %s", type(exc).__name__, exc)
        return JSONResponse(
            {"detail": "the service's store (Redis) is unavailable; retry later"}, status_code=503, headers=RETRY
        )

    async def too_large(request: Request, exc: HTTPException) -> JSONResponse:
        limit = request.scope.get(MAX_BODY_SIZE_SCOPE_KEY)
        detail = too_large_detail(limit) if limit is not None else exc.detail
        return JSONResponse({"detail": detail}, status_code=413)

    async def unreadable(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": f"{SEND_JSON}: the body is not JSON text ({exc.detail})"}, status_code=400)

    async def redis_refused(request: Request, exc: redis.exceptions.ResponseError) -> JSONResponse:
        # redis-py has no class for a server that refuses writes because it cannot persist them (MISCONF: a full
        # disk, a failed snapshot), so ask the server itself rather than read the message.
        if await cannot_persist(r):
            return await redis_down(request, exc)
        raise exc

    app.add_exception_handler(redis.exceptions.ResponseError, redis_refused)  # type: ignore[arg-type]
    app.add_exception_handler(400, unreadable)  # type: ignore[arg-type]  # FastAPI's only 400: undecodable bodies
    app.add_exception_handler(413, too_large)  # type: ignore[arg-type]
    for exc_class in REDIS_UNAVAILABLE:
        app.add_exception_handler(exc_class, redis_down)
