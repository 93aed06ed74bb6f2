"""Latency of the gateway alone under load: `POST /evaluate?wait=0` that enqueues a new job, and one that is
answered from the result cache, each with N concurrent clients for S seconds.

    .venv/bin/python bench/gateway_load.py                       # 200 clients, 30 s per test
    .venv/bin/python bench/gateway_load.py --clients 200 --seconds 30 --json /tmp/gateway_load.json
    .venv/bin/python bench/gateway_load.py --client-per-task     # a cheaper load generator, see below

Starts a private stack (`kernelgym.stack.LocalStack`, device class `cpu`): Redis and one gateway in
development mode on loopback, with the per-key rate limit and the cap on unfinished evaluations raised out of
the way. No workers are started, so enqueued jobs stay queued.

- enqueue: every request carries a unique candidate (the bundled `level1/1_ReLU` kernel plus a unique comment)
  for `problem_id="level1/1_ReLU"`, so every request creates a job and sends a Celery task.
- cache hit: one submission is made once (its job stays queued), then the identical submission is repeated;
  every reply must say `cached: true`.

The clients are asyncio tasks, each sending its next request as soon as the previous one is answered (closed
loop, no think time), after an unrecorded warm-up; by default they share one `httpx.AsyncClient` with a
connection per task. Latency is measured per request with `time.perf_counter` around the whole call;
percentiles and throughput are over the good replies (2xx and as expected), and everything else (non-2xx,
transport errors, unexpected replies) is counted as an error. A target counts as met only with no errors.

Also reported: the gateway's own timing of the same requests (its Prometheus histogram, which starts inside
the application, after HTTP parsing and any wait for the event loop) and the CPU used by the gateway, Redis
and the load generator during each test (with several gateway processes, `KERNELGYM_GATEWAY_PROCESSES`, the
CPU is theirs together but the histogram is that of whichever process answers /metrics). The load generator
runs on the same machine and shares its CPUs.

Targets (from the issue): enqueue p99 <= 25 ms, cache-hit p50 <= 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelgym.stack import LocalStack  # noqa: E402
from services.problems import bundled_kernel  # noqa: E402

PROBLEM = "level1/1_ReLU"
TARGETS = {"enqueue": ("p99", 25.0), "cache_hit": ("p50", 5.0)}
LATENCY_METRIC = "kernelgym_http_request_duration_seconds"


def percentile(sorted_ms: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_ms:
        return float("nan")
    rank = max(1, -(-len(sorted_ms) * q // 100))  # ceil(n * q / 100)
    return sorted_ms[int(rank) - 1]


async def load(
    pool: list[httpx.AsyncClient],
    clients: int,
    seconds: float,
    body_for: Callable[[], dict[str, Any]],
    check: Callable[[dict[str, Any]], bool],
) -> dict[str, Any]:
    """`clients` tasks each send requests back to back for `seconds` (task i through pool[i % len(pool)]);
    returns the latencies of the good replies (2xx and as expected) and the errors by kind."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    stop = time.perf_counter() + seconds

    def error(kind: str) -> None:
        errors[kind] = errors.get(kind, 0) + 1

    async def one_client(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < stop:
            body = body_for()
            t0 = time.perf_counter()
            try:
                response = await client.post("/evaluate", params={"wait": 0}, json=body)
            except httpx.HTTPError as exc:
                error(type(exc).__name__)
                continue
            latency = (time.perf_counter() - t0) * 1000
            if not response.is_success:
                error(f"HTTP {response.status_code}")
            elif not check(response.json()):
                error("unexpected reply")
            else:
                latencies.append(latency)

    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(pool[i % len(pool)]) for i in range(clients)))
    elapsed = time.perf_counter() - t0
    return {"latencies_ms": latencies, "errors": errors, "elapsed_s": elapsed}


def summarise(run: dict[str, Any]) -> dict[str, Any]:
    lat = sorted(run["latencies_ms"])
    errors = sum(run["errors"].values())
    return {
        "ok": len(lat),
        "elapsed_s": round(run["elapsed_s"], 2),
        "rps": round(len(lat) / run["elapsed_s"], 1),
        "error_rate": round(errors / (len(lat) + errors), 4) if lat or errors else 0.0,
        "mean_ms": round(statistics.fmean(lat), 2) if lat else None,
        "p50_ms": round(percentile(lat, 50), 2),
        "p90_ms": round(percentile(lat, 90), 2),
        "p99_ms": round(percentile(lat, 99), 2),
        "max_ms": round(lat[-1], 2) if lat else None,
        "errors": errors,
        "error_kinds": run["errors"],
    }


def server_histogram(text: str) -> dict[str, float]:
    """Cumulative bucket counts (and `sum`, `count`) of the gateway's own latency of POST /evaluate."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(LATENCY_METRIC) or 'route="/evaluate"' not in line or 'method="POST"' not in line:
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith(LATENCY_METRIC + "_bucket"):
            le = re.search(r'le="([^"]+)"', name)
            if le:
                out[le.group(1)] = float(value)
        elif name.startswith(LATENCY_METRIC + "_sum"):
            out["sum"] = float(value)
        elif name.startswith(LATENCY_METRIC + "_count"):
            out["count"] = float(value)
    return out


def server_side(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The gateway's own timing of the requests between two scrapes, error replies included: mean, and the share
    within each bucket bound (from its middleware: excludes HTTP parsing and any wait for the event loop before
    it)."""
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    count = delta.get("count", 0.0)
    if not count:
        return {}
    within = {le: round(n / count, 4) for le, n in delta.items() if le not in ("sum", "count", "+Inf")}
    return {"requests": int(count), "mean_ms": round(delta["sum"] / count * 1000, 2), "share_within_s": within}


def cpu_seconds(group: int | None) -> float | None:
    """User + system CPU time so far of the live processes of a process group (Linux /proc), or None where
    unavailable. LocalStack starts each service as its own group, so a gateway's worker processes count too."""
    if group is None or not Path("/proc/self/stat").exists():
        return None
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if int(fields[2]) == group:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_share(before: dict[str, float | None], after: dict[str, float | None], wall: float) -> dict[str, float]:
    """Each process's CPU use over a test, in cores (1.0: one core busy all the time)."""
    return {
        name: round((after[name] - b) / wall, 2)
        for name, b in before.items()
        if b is not None and after.get(name) is not None
    }


async def run_tests(
    base_url: str, clients: int, seconds: float, warmup: float, pids: dict[str, int | None], own_clients: bool = False
) -> dict[str, Any]:
    kernel = bundled_kernel(PROBLEM).read_text()
    run_id = uuid.uuid4().hex
    counter = 0

    def unique_body() -> dict[str, Any]:
        nonlocal counter
        counter += 1
        return {"problem_id": PROBLEM, "candidate": f"{kernel}\n# gateway_load {run_id} {counter}\n"}

    cached_body = {"problem_id": PROBLEM, "candidate": f"{kernel}\n# gateway_load {run_id} cached\n"}
    results: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        if own_clients:  # one single-connection client per task
            one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            pool = [
                await stack.enter_async_context(httpx.AsyncClient(base_url=base_url, limits=one, timeout=60))
                for _ in range(clients)
            ]
        else:  # one client shared by every task, with a connection for each
            size = max(256, clients)
            limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
            pool = [await stack.enter_async_context(httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60))]
        client = pool[0]
        first = await client.post("/evaluate", params={"wait": 0}, json=cached_body)
        first.raise_for_status()
        assert first.json()["cached"] is False, first.json()
        tests: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], bool]]] = [
            ("enqueue", unique_body, lambda reply: reply["cached"] is False and reply["status"] == "queued"),
            ("cache_hit", lambda: cached_body, lambda reply: reply["cached"] is True),
        ]
        for name, body_for, check in tests:
            if warmup > 0:
                await load(pool, clients, warmup, body_for, check)
            before = server_histogram((await client.get("/metrics")).text)
            cpu0 = {proc: cpu_seconds(pid) for proc, pid in pids.items()} | {"load generator": time.process_time()}
            run = await load(pool, clients, seconds, body_for, check)
            cpu1 = {proc: cpu_seconds(pid) for proc, pid in pids.items()} | {"load generator": time.process_time()}
            after = server_histogram((await client.get("/metrics")).text)
            results[name] = {
                **summarise(run),
                "server": server_side(before, after),
                "cpu_cores": cpu_share(cpu0, cpu1, run["elapsed_s"]),
            }
            print(f"{name}: done, {results[name]['ok']} good replies", file=sys.stderr, flush=True)
    return results


def table(results: dict[str, Any]) -> str:
    head = "| test | ok replies | ok/s | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | errors | target |"
    rows = [head, "|" + "---|" * 9]
    for name, r in results.items():
        stat, bound = TARGETS[name]
        met = "met" if r[f"{stat}_ms"] <= bound and r["errors"] == 0 else "NOT met"
        rows.append(
            f"| {name} | {r['ok']} | {r['rps']} | {r['p50_ms']} | {r['p90_ms']} | {r['p99_ms']} | "
            f"{r['max_ms']} | {r['errors']} ({r['error_rate']:.1%}) | {stat} <= {bound:g} ms: {met} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200, help="concurrent clients (default 200)")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured duration of each test (default 30)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unrecorded load before each test (default 2 s)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this path")
    parser.add_argument(
        "--client-per-task",
        action="store_true",
        help="give each task its own single-connection httpx client instead of one shared client (whose pool "
        "bookkeeping costs the load generator CPU in proportion to the number of connections)",
    )
    parser.add_argument("--workdir", type=Path, help="keep the stack's files (gateway.log, redis.log) here")
    args = parser.parse_args(argv)

    load_avg = os.getloadavg()
    print(f"CPUs: {os.cpu_count()} (shared by the load generator, the gateway and Redis)", file=sys.stderr)
    print(f"load average before: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}", file=sys.stderr)
    with LocalStack(workdir=args.workdir, device_class="cpu") as stack:
        stack.start_redis()
        stack.start_gateway(KERNELGYM_RATE_LIMIT_PER_MINUTE="100000000", KERNELGYM_MAX_QUEUED_PER_KEY="100000000")
        pids = {
            "gateway": stack.gateway_proc.pid if stack.gateway_proc else None,
            "redis": stack.redis_proc.pid if stack.redis_proc else None,
        }
        results = asyncio.run(
            run_tests(stack.base_url, args.clients, args.seconds, args.warmup, pids, args.client_per_task)
        )

    print(f"\nCPUs: {os.cpu_count()}, clients: {args.clients}, {args.seconds:g} s per test\n")
    print(table(results))
    for name, r in results.items():
        if r["error_kinds"]:
            print(f"{name} errors: {r['error_kinds']}")
        if r["server"]:
            within = r["server"]["share_within_s"]
            print(
                f"{name} gateway-side: mean {r['server']['mean_ms']} ms, "
                f"<=5 ms {within.get('0.005', 0):.1%}, <=25 ms {within.get('0.025', 0):.1%}"
            )
        if r["cpu_cores"]:
            print(f"{name} CPU use (cores): " + ", ".join(f"{k} {v}" for k, v in r["cpu_cores"].items()))
    if args.json:
        doc = {
            "cpu_count": os.cpu_count(),
            "load_average_before": load_avg,
            "clients": args.clients,
            "seconds": args.seconds,
            "warmup_s": args.warmup,
            "client_per_task": args.client_per_task,
            "results": results,
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
