"""Redis memory per queued evaluation: what to give Redis for a backlog of N evaluations (docs/deploy.md).

    .venv/bin/python bench/redis_memory.py                          # 1000 evaluations, bundled sources
    .venv/bin/python bench/redis_memory.py --n 1000 --pad-to 8192   # candidates padded to 8 KiB each
    .venv/bin/python bench/redis_memory.py --json /tmp/redis_memory.json

Starts a private stack (`kernelgym.stack.LocalStack`: the system's redis-server, append-only file on, and one
gateway in development mode on loopback), with no worker, so every evaluation stays queued. It submits N
evaluations through the real HTTP API (`POST /evaluate/batch?wait=0`, batches of up to 256), each a unique
candidate for a bundled problem (cycling over all of them; a unique comment makes each a new job rather than
a cache hit), optionally padded with a trailing comment to `--pad-to` bytes. Each one leaves what the
gateway writes for a queued evaluation: its job record (request, resolved reference source, metadata), its
cache-key entry, its member in the owner's set of unfinished evaluations, and the Celery message (the job id)
in the queue list.

Reported: `used_memory` from `INFO memory` before and after (the difference divided by N is the cost of one
queued evaluation, allocator overhead included), `MEMORY USAGE` of one job record, the queue list and the
other keys, and the mean candidate and reference sizes. A finished evaluation also holds its result (a few KB
of JSON, more with long feedback) for KERNELGYM_JOB_TTL_S; that is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provenance import commit  # noqa: E402

from gym_common.jobs import Keys  # noqa: E402
from kernelgym.stack import LocalStack  # noqa: E402
from services.problems import bundled_kernel, bundled_problems  # noqa: E402

BATCH = 256


def candidates(n: int, pad_to: int) -> list[tuple[str, str]]:
    """(problem id, candidate source) pairs: every bundled problem in turn, each candidate unique."""
    ids = bundled_problems().ids()
    out = []
    for i in range(n):
        problem = ids[i % len(ids)]
        source = bundled_kernel(problem).read_text() + f"\n# {uuid.uuid4().hex}\n"
        if len(source) < pad_to:
            filler = "# " + "x" * 78 + "\n"
            source += filler * ((pad_to - len(source)) // len(filler) + 1)
            source = source[:pad_to].rsplit("\n", 1)[0] + "\n"
        out.append((problem, source))
    return out


def measure(n: int, pad_to: int, workdir: Path | None) -> dict[str, Any]:
    env = {"KERNELGYM_MAX_QUEUED_PER_KEY": str(max(2000, 2 * n)), "KERNELGYM_BATCH_MAX": str(BATCH)}
    with LocalStack(workdir, env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        r = redis.Redis.from_url(stack.redis_url)
        items = candidates(n, pad_to)
        with httpx.Client(base_url=stack.base_url, timeout=120) as http:
            # One evaluation first, so the baseline includes the gateway's connections and Lua scripts.
            (warm,) = candidates(1, pad_to)
            reply = http.post("/evaluate", params={"wait": 0}, json={"problem_id": warm[0], "candidate": warm[1]})
            assert reply.status_code == 202, reply.text
            before = int(r.info("memory")["used_memory"])
            keys_before = r.dbsize()
            t0 = time.perf_counter()
            for start in range(0, n, BATCH):
                batch = [{"problem_id": p, "candidate": c} for p, c in items[start : start + BATCH]]
                reply = http.post("/evaluate/batch", params={"wait": 0}, json={"items": batch})
                reply.raise_for_status()
                statuses = {e["status"] for e in reply.json()["evaluations"]}
                assert statuses == {"queued"}, statuses
            seconds = time.perf_counter() - t0
        after = int(r.info("memory")["used_memory"])
        keys = Keys("kg")
        queue = keys.queue(stack.device_class, "normal")
        assert r.llen(queue) >= n, f"{r.llen(queue)} queued, expected {n}"
        job_ids = list(r.scan_iter(match=keys.job("*"), count=1000))
        job_sizes = [r.memory_usage(k, samples=0) for k in job_ids[:200]]
        cache_keys = list(r.scan_iter(match=keys.cache("*"), count=1000))
        active = list(r.scan_iter(match=keys.active("*"), count=100))
        server = r.info("server")
        references = {p: len(bundled_problems().load(p).source) for p in {p for p, _ in items}}
        return {
            "n": n,
            "pad_to": pad_to,
            "candidate_bytes_mean": round(statistics.mean(len(c) for _, c in items)),
            "reference_bytes_mean": round(statistics.mean(references[p] for p, _ in items)),
            "used_memory_before": before,
            "used_memory_after": after,
            "bytes_per_queued_evaluation": round((after - before) / n),
            "mib_per_1000_queued": round((after - before) / n * 1000 / 2**20, 2),
            "job_record_bytes_median": int(statistics.median(job_sizes)),
            "queue_list_bytes": r.memory_usage(queue, samples=0),
            "cache_entry_bytes_median": int(statistics.median(r.memory_usage(k, samples=0) for k in cache_keys[:200])),
            "active_set_bytes": sum(r.memory_usage(k, samples=0) for k in active),
            "keys_added": r.dbsize() - keys_before,
            "enqueue_seconds": round(seconds, 2),
            "redis_version": server["redis_version"],
            "allocator": r.info("memory").get("mem_allocator"),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="evaluations to queue (default 1000)")
    parser.add_argument("--pad-to", type=int, default=0, help="pad each candidate to this many bytes")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    result = measure(args.n, args.pad_to, None)
    result["commit"] = commit()
    result["date"] = time.strftime("%Y-%m-%d")
    result["cpus"] = os.cpu_count()
    for key, value in result.items():
        print(f"{key:32s} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
