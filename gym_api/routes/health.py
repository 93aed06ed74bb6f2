"""Liveness and readiness, unauthenticated (container probes and load balancers call them)."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gym_api.deps import GatewayDep
from gym_api.metrics import slot_counts, worker_nodes
from gym_api.models import Readiness

log = logging.getLogger("kernelgym.gateway")

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "alive"}


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(gw: GatewayDep) -> JSONResponse:
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
