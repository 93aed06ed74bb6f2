"""Prometheus metrics. Request counts and latencies are this replica's; everything about evaluations,
queues and workers is read from Redis at scrape time, so every replica reports the same cluster-wide view."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import redis.asyncio as aioredis
from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from gym_common.jobs import DURATION_BUCKETS, Keys


class ClusterCollector:
    """Yields the metrics of the last Redis snapshot; `refresh` takes a new one before each scrape."""

    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = {}

    async def refresh(self, r: aioredis.Redis, keys: Keys, device_classes: Iterable[str]) -> None:
        workers = []
        async for key in r.scan_iter(match=keys.worker_pattern(), count=500):
            info = await r.hgetall(key)
            if info:
                workers.append({k.decode(): v.decode() for k, v in info.items()})
        classes = set(device_classes) | {w.get("device_class", "") for w in workers}
        depths = {}
        for dc in sorted(c for c in classes if c):
            for queue in keys.queues(dc):
                depths[queue] = await r.llen(queue)
        self.snapshot = {
            "workers": workers,
            "depths": depths,
            "verdicts": {k.decode(): int(v) for k, v in (await r.hgetall(keys.verdicts())).items()},
            "durations": {k.decode(): float(v) for k, v in (await r.hgetall(keys.durations())).items()},
            "cache_hits": int(await r.get(keys.cache_hits()) or 0),
        }

    def collect(self) -> Iterable[Metric]:
        snap = self.snapshot
        if not snap:
            return
        depth = GaugeMetricFamily("kernelgym_queue_depth", "Evaluations waiting per queue", labels=["queue"])
        for queue, n in snap["depths"].items():
            depth.add_metric([queue], n)
        yield depth
        alive = GaugeMetricFamily(
            "kernelgym_workers_alive", "Workers with a fresh heartbeat", labels=["device_class", "quarantined"]
        )
        counts: dict[tuple[str, str], int] = {}
        for w in snap["workers"]:
            label = (w.get("device_class", ""), "true" if w.get("quarantined") == "1" else "false")
            counts[label] = counts.get(label, 0) + 1
        for label, n in sorted(counts.items()):
            alive.add_metric(list(label), n)
        yield alive
        verdicts = CounterMetricFamily("kernelgym_evaluations", "Finished evaluations by verdict", labels=["verdict"])
        for verdict, n in sorted(snap["verdicts"].items()):
            verdicts.add_metric([verdict], n)
        yield verdicts
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
            route = request.scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.requests.labels(path, request.method, str(code)).inc()
            self.latency.labels(path, request.method).observe(time.perf_counter() - t0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
