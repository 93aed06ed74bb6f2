"""How fast a host starts and tears down evaluation children, by how many loops do it at once on which GPUs.

    python bench/context_churn.py                           # layouts 1, 2, 1+1, 2+2, 8 s each
    python bench/context_churn.py --layouts 1,4,2+2 --seconds 10

Every evaluation uses two fresh children (services.sandbox.Child: forked by the zygote, a CUDA context each, torn
down when the evaluation closes them). On a host of two GPUs the service's requests outside the timing slot took
1.2-3.7 times as long as on one (docs/benchmarks.md), which would follow if the NVIDIA driver serialised
context creation or teardown across the whole host. A layout is loops per GPU, joined by `+` ("2+2": two loops on
GPU 0, two on GPU 1); each loop starts a child, waits until it is ready, closes it and waits until it is gone,
again and again. Per layout it prints one JSON line: children a second over the host, and the median and spread of
a child's start (to ready) and of its end (close to gone). If the driver serialises across GPUs, "1+1" gives no more
children a second than "2", and its starts and ends take as long as "2"'s; if not, "1+1" gives twice "1".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.sandbox import Child, drain_closed_children
from services.settings import EvalSettings


def _loop(device: str, gpu: int, seconds: float, ready: int, go: int, out: int) -> None:
    """In a forked process: one uncounted child (this process's zygote starts with it), then, once every loop is
    ready (`go` closes), children on `gpu` for `seconds`; one JSON line of timings to `out`."""
    if device == "cuda":
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    settings = EvalSettings()
    starts, ends = [], []
    first = True
    until = 0.0
    while first or time.monotonic() < until:
        t0 = time.monotonic()
        child = Child(device, settings)
        child.wait_ready(t0 + settings.child_start_timeout_s)
        t1 = time.monotonic()
        child.close()
        drain_closed_children(every=True)
        if first:
            os.write(ready, b"r")
            os.read(go, 1)  # end of file once the bench closes its end
            first, until = False, time.monotonic() + seconds
            continue
        starts.append(t1 - t0)
        ends.append(time.monotonic() - t1)
    os.write(out, (json.dumps({"gpu": gpu, "starts": starts, "ends": ends, "span": seconds}) + "\n").encode())


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def run_layout(device: str, layout: str, seconds: float) -> dict:
    """Loops per GPU as `layout` says, started together once each has had its uncounted first child."""
    per_gpu = [int(n) for n in layout.split("+")]
    (read, write), (ready_r, ready_w), (go_r, go_w) = os.pipe(), os.pipe(), os.pipe()
    pids = []
    for gpu, n in enumerate(per_gpu):
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    for fd in (read, ready_r, go_w):
                        os.close(fd)
                    _loop(device, gpu, seconds, ready_w, go_r, write)
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
    for fd in (write, ready_w, go_r):
        os.close(fd)
    for _ in pids:  # a loop that fails before it is ready closes its end: read returns b""
        if not os.read(ready_r, 1):
            break
    began = time.monotonic()
    os.close(go_w)
    failed = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0 for pid in pids)
    wall = time.monotonic() - began
    with os.fdopen(read) as f:
        loops = [json.loads(line) for line in f]
    os.close(ready_r)
    starts = [s for loop in loops for s in loop["starts"]]
    ends = [e for loop in loops for e in loop["ends"]]
    return {
        "layout": layout,
        "loops": len(pids),
        "failed_loops": failed,
        "children": len(starts),
        "wall_s": round(wall, 2),
        "children_per_s": round(len(starts) / wall, 2),
        "per_gpu_per_s": round(len(starts) / wall / len(per_gpu), 2),
        "start_s": _spread(starts) if starts else None,
        "end_s": _spread(ends) if ends else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layouts", default="1,2,1+1,2+2", help="comma-separated; loops per GPU joined by +")
    parser.add_argument("--seconds", type=float, default=8.0, help="counted seconds per layout")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: the script's own check")
    args = parser.parse_args()
    commit = os.environ.get("KERNELGYM_COMMIT", "")
    for layout in args.layouts.split(","):
        row = run_layout(args.device, layout, args.seconds)
        print(json.dumps({**row, "commit": commit}), flush=True)


if __name__ == "__main__":
    main()
