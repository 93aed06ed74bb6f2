"""The FastAPI application of one gateway process: its gateway, middleware, error handlers and routers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gym_api import guard
from gym_api.gateway import Gateway
from gym_api.routes import evaluate, evaluations, health, metrics, problems
from gym_api.routes.evaluate import ITEM_MAX_BYTES
from gym_common.settings import ServiceSettings
from services.schema import PROTOCOL_VERSION

# Requests without a body of their own (GET, DELETE, unknown routes).
OTHER_MAX_BYTES = 16 * 1024


def create_app(settings: ServiceSettings) -> FastAPI:
    """The app of `settings`, loaded once by this process's entry point; routes reach them and the gateway
    through `gym_api.deps`."""
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
    app.state.settings = settings
    app.state.gateway = gw
    app.add_middleware(guard.BodyRules, json_routes=body_limits, other_max_bytes=OTHER_MAX_BYTES)
    # Added last, so outermost: it also counts what BodyRules refuses (413, 415) before any route runs.
    app.middleware("http")(gw.metrics.middleware)
    guard.install(app, gw.r)
    app.include_router(evaluate.router, max_body_size=body_limits["POST", "/evaluate/batch"])
    for module in (evaluations, problems, health, metrics):
        app.include_router(module.router)
    return app
