"""Prometheus metrics. Request counts and latencies are this replica's; everything about evaluations,
queues and workers is read from Redis at scrape time, so every replica reports the same cluster-wide view."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import redis.asyncio as aioredis
from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from starlette.routing import BaseRoute, Match

from gym_common.jobs import DURATION_BUCKETS, Keys


def _quarantined(heartbeat: dict[str, str]) -> bool:
    return heartbeat.get("quarantined") == "1"


def worker_nodes(heartbeats: Iterable[dict[str, str]]) -> dict[str, tuple[str, bool]]:
    """Each worker (a Celery node) that has a live pool process -> (device class, quarantined). Every pool
    process beats on its own; a node is quarantined when any of its processes reports its device so."""
    nodes: dict[str, tuple[str, bool]] = {}
    for hb in heartbeats:
        node = hb.get("node") or hb.get("name", "")
        dc, quarantined = nodes.get(node, (hb.get("device_class", ""), False))
        nodes[node] = (dc, quarantined or _quarantined(hb))
    return nodes


def worker_counts(heartbeats: Iterable[dict[str, str]]) -> dict[tuple[str, bool], int]:
    """(device class, quarantined) -> live workers."""
    counts: dict[tuple[str, bool], int] = {}
    for label in worker_nodes(heartbeats).values():
        counts[label] = counts.get(label, 0) + 1
    return counts


def slot_counts(heartbeats: Iterable[dict[str, str]]) -> dict[tuple[str, bool], int]:
    """(device class, quarantined) -> live pool processes."""
    counts: dict[tuple[str, bool], int] = {}
    for hb in heartbeats:
        label = (hb.get("device_class", ""), _quarantined(hb))
        counts[label] = counts.get(label, 0) + 1
    return counts


class ClusterCollector:
    """Yields the metrics of the last Redis snapshot; `refresh` takes a new one before each scrape."""

    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = {}
        self.redis_up: bool | None = None  # unknown until the first refresh

    async def refresh(self, r: aioredis.Redis, keys: Keys, device_classes: Iterable[str]) -> None:
        """Take a new snapshot. If Redis does not answer, the snapshot is dropped and the error raised: a scrape
        during an outage shows Redis down, not the figures from before it."""
        try:
            self.snapshot = await self._read(r, keys, device_classes)
        except Exception:
            self.snapshot, self.redis_up = {}, False
            raise
        self.redis_up = True

    async def _read(self, r: aioredis.Redis, keys: Keys, device_classes: Iterable[str]) -> dict[str, Any]:
        """Read the cluster's state; record the device classes live workers serve (gym_api.gateway accepts
        submissions for those), and count the queues of every class accepted or served."""
        now = time.time()
        workers = []
        async for key in r.scan_iter(match=keys.worker_pattern(), count=500):
            info = await r.hgetall(key)
            if info:  # the key names the pool process: a heartbeat without a node still counts once
                workers.append({"name": key.decode(), **{k.decode(): v.decode() for k, v in info.items()}})
        live = {w.get("device_class", "") for w in workers} - {""}
        if live:
            await r.hset(keys.device_classes(), mapping={dc: repr(now) for dc in live})
        served = {k.decode() for k in await r.hkeys(keys.device_classes())}
        depths, queued = {}, {}
        for dc in sorted(set(device_classes) | live | served):
            for queue in keys.queues(dc):
                depths[queue] = await r.llen(queue)
            queued[dc] = sum(depths[q] for q in keys.queues(dc))
        return {
            "workers": workers,
            "depths": depths,
            "queued": queued,
            "verdicts": {k.decode(): int(v) for k, v in (await r.hgetall(keys.verdicts())).items()},
            "finished": {k.decode(): int(v) for k, v in (await r.hgetall(keys.finished())).items()},
            "durations": {k.decode(): float(v) for k, v in (await r.hgetall(keys.durations())).items()},
            "cache_hits": int(await r.get(keys.cache_hits()) or 0),
        }

    def collect(self) -> Iterable[Metric]:
        if self.redis_up is not None:
            yield GaugeMetricFamily(
                "kernelgym_redis_up", "Whether Redis answered this scrape (1) or not (0)", int(self.redis_up)
            )
        snap = self.snapshot
        if not snap:
            return
        depth = GaugeMetricFamily("kernelgym_queue_depth", "Evaluations waiting per queue", labels=["queue"])
        for queue, n in snap["depths"].items():
            depth.add_metric([queue], n)
        yield depth
        for name, doc, counts in (
            ("kernelgym_workers_alive", "Workers (Celery nodes, one per GPU) with a fresh heartbeat", worker_counts),
            (
                "kernelgym_evaluation_slots_alive",
                "Pool processes with a fresh heartbeat: how many evaluations the live workers run at once",
                slot_counts,
            ),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["device_class", "quarantined"])
            for (dc, quarantined), n in sorted(counts(snap["workers"]).items()):
                gauge.add_metric([dc, "true" if quarantined else "false"], n)
            yield gauge
        verdicts = CounterMetricFamily("kernelgym_evaluations", "Finished evaluations by verdict", labels=["verdict"])
        for verdict, n in sorted(snap["verdicts"].items()):
            verdicts.add_metric([verdict], n)
        yield verdicts
        finished = CounterMetricFamily(
            "kernelgym_evaluations_finished",
            "Evaluations that reached a final status: done (with a verdict), cancelled, or failed (not evaluated)",
            labels=["status"],
        )
        for state, n in sorted(snap.get("finished", {}).items()):
            finished.add_metric([state], n)
        yield finished
        yield CounterMetricFamily(
            "kernelgym_cache_hits", "Submissions answered from the result cache", snap["cache_hits"]
        )
        durations = snap["durations"]
        buckets, running = [], 0.0
        for bound in (*[str(b) for b in DURATION_BUCKETS], "+Inf"):
            running += durations.get(bound, 0.0)
            buckets.append((bound, running))
        yield HistogramMetricFamily(
            "kernelgym_evaluation_duration_seconds",
            "Wall time of an evaluation on its worker",
            buckets=buckets,
            sum_value=durations.get("sum", 0.0),
        )


def routes(entries: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes of an app's router, those of its included routers (included without a prefix) among them:
    FastAPI keeps an included router as one entry, which matches a request without naming its route."""
    for entry in entries:
        included = getattr(entry, "original_router", None)
        yield from routes(included.routes) if included is not None else (entry,)


def route_path(request: Request) -> str:
    """The route's path template; for a request refused before routing (413, 415), the route it was for."""
    route = request.scope.get("route")
    if route is None:
        found = (r for r in routes(request.app.router.routes) if r.matches(request.scope)[0] == Match.FULL)
        route = next(found, None)
    return getattr(route, "path", "unmatched")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kernelgym_http_requests", "HTTP requests", ["route", "method", "code"], registry=self.registry
        )
        self.latency = Histogram(
            "kernelgym_http_request_duration_seconds",
            "HTTP request latency",
            ["route", "method"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            registry=self.registry,
        )
        self.cluster = ClusterCollector()
        self.registry.register(self.cluster)

    async def middleware(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        t0 = time.perf_counter()
        code = 500
        try:
            response = await call_next(request)
            code = response.status_code
            return response
        finally:
            path = route_path(request)
            self.requests.labels(path, request.method, str(code)).inc()
            self.latency.labels(path, request.method).observe(time.perf_counter() - t0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
