"""Why a child must not start the profiler before it is timed: what the first profiler session in a process costs,
what one after it costs, and how much slower every launch is after it.

    python bench/profiler_warmup.py --processes 8

Each of `--processes` fresh processes (torch imported, its CUDA context created, as an evaluation child before its
job) measures in turn: `launch_before_us`, the host time per launch of a small kernel over `--launches` launches;
`warm_ms`, a first profiler session (CUDA activity, a sleep kernel inside, its events read: what a waiting child
would run to take the profiler's one-time start off the profile request); `launch_after_us`, the launches again;
`session_ms`, a profiler session around a small forward with its events read, as the profile request runs it.
Where the profiler leaves CUPTI attached, every later launch pays its callbacks and `launch_after_us` exceeds
`launch_before_us`: then a warm-up before the job would slow what is timed (docs/benchmarks.md).
Prints one JSON line per process, then the medians and ranges.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = r"""
import json, sys, time
import torch
from torch.profiler import ProfilerActivity, profile

n = int(sys.argv[1])
x = torch.ones(256, device="cuda")
torch.cuda.synchronize()

def launches() -> float:
    for _ in range(100):
        x.add_(0)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        x.add_(0)
    spent = time.perf_counter() - t
    torch.cuda.synchronize()
    return spent / n * 1e6

before = launches()
t = time.perf_counter()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    torch.cuda._sleep(1)
    torch.cuda.synchronize()
prof.events()
warm = (time.perf_counter() - t) * 1e3
after = launches()
t = time.perf_counter()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    (x * 2).sum()
kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
session = (time.perf_counter() - t) * 1e3
print(json.dumps({"launch_before_us": before, "warm_ms": warm, "launch_after_us": after, "session_ms": session,
                  "session_kernels": kernels}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--launches", type=int, default=5000)
    args = parser.parse_args()
    rows = []
    for _ in range(args.processes):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(args.launches)], capture_output=True, text=True, check=True
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(row), flush=True)
        rows.append(row)
    summary = {
        key: {
            "median": round(statistics.median(r[key] for r in rows), 3),
            "range": [round(min(r[key] for r in rows), 3), round(max(r[key] for r in rows), 3)],
        }
        for key in ("launch_before_us", "launch_after_us", "warm_ms", "session_ms")
    }
    print(json.dumps({"processes": len(rows), "launches": args.launches, "summary": summary}))


if __name__ == "__main__":
    main()
