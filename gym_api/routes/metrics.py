"""Prometheus metrics of this gateway process and of the cluster as Redis records it."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse

from gym_api.deps import GatewayDep

log = logging.getLogger("kernelgym.gateway")

router = APIRouter()


@router.get("/metrics", response_class=PlainTextResponse, responses={200: {"content": {"text/plain": {}}}})
async def metrics(gw: GatewayDep) -> Response:
    try:
        await gw.metrics.cluster.refresh(gw.r, gw.keys, gw.always_accepted())
    except Exception as exc:
        log.warning("metrics: Redis unavailable: %s", exc)
    return Response(gw.metrics.render(), media_type="text/plain; version=0.0.4")
