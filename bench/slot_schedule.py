"""How the timing slot's admission policy bounds a pipelined worker: evaluations replayed as sleeps through the real
`services.device_lock.TimingSlot`, no GPU.

    python bench/slot_schedule.py                          # the H100 run-10 workload, gather 0 / 0.5 / 1 / 2 / 3 s
    python bench/slot_schedule.py --in-flight 12 --gather 0,1 --seconds 60

Each of `--in-flight` threads (each with its own TimingSlot, so its own lock files' descriptors, as a pool process
has) runs evaluations one after another: CPU work outside the device (`--cpu-s`), the candidate's first call
(`--first-call-s`: compiling and running forward(), held shared), `--requests` correctness requests of
`--request-s` each (shared), the measurement (`--hold-s`, exclusive; one in `--long-every` is `--long-hold-s`:
adaptive sampling's tail), then the profiler's request (`--profile-s`) and a short one (output dependence). The
defaults are the medians of the pipelined run 10 on an H100 (docs/benchmarks.md: 8 in flight, first call 2.19 s,
hold 0.62 s, two holds in 36 of 5.6 and 11.8 s); what this leaves out is that a real device runs the shared
requests' kernels and the host's CPU contention, which lengthens the first call as more run at once. `--scale`
shortens every duration alike.

Per policy (`--gather`: seconds a measurement lets other evaluations' requests run on before it stops them, unless
the device is idle or another measurement already stopped them) it prints evaluations per minute (at scale 1),
the share of the wall time the slot was held, and the measurements' median wait for the drain.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.device_lock import TimingSlot


def run_policy(args: argparse.Namespace, gather_s: float, lock_dir: Path) -> dict:
    k = args.scale
    stop = time.monotonic() + args.seconds
    done: list[tuple[float, float, float]] = []  # (held, drained, waited) per measurement
    lock = threading.Lock()

    def evaluations(seed: int) -> None:
        rng = random.Random(seed)  # the same durations for every policy

        def sleep(s: float) -> None:  # each duration varies by ±50% around its median
            time.sleep(s * k * rng.uniform(0.5, 1.5))

        slot = TimingSlot(lock_dir / "gpu-sim.lock", gather_s=gather_s * k)
        sleep(args.cpu_s * 4)  # staggered starts, as a worker's batch arrives
        while time.monotonic() < stop:
            slot.reset()
            sleep(args.cpu_s)
            with slot.shared("compiling and running forward()"):
                sleep(args.first_call_s)
            for _ in range(args.requests):
                with slot.shared("correctness"):
                    sleep(args.request_s)
            long = args.long_every and rng.random() < 1 / args.long_every
            with slot():
                sleep(args.long_hold_s if long else args.hold_s)
            with slot.shared("profiling forward()"):
                sleep(args.profile_s)
            with slot.shared("output dependence"):
                sleep(0.1)
            if time.monotonic() < stop:
                with lock:
                    done.append((slot.held_s / k, slot.drained_s / k, slot.waited_s / k))

    t0 = time.monotonic()
    threads = [threading.Thread(target=evaluations, args=(i,)) for i in range(args.in_flight)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = (min(time.monotonic(), stop) - t0) / k
    held = sum(d[0] for d in done)
    return {
        "gather_s": gather_s,
        "in_flight": args.in_flight,
        "evaluations": len(done),
        "per_minute": round(len(done) / wall * 60, 1) if wall else 0.0,
        "slot_busy": round(held / wall, 3) if wall else 0.0,
        "drain_wait_median_s": round(statistics.median(d[1] for d in done), 3) if done else None,
        "slot_wait_median_s": round(statistics.median(d[2] for d in done), 3) if done else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gather", default="0,0.5,1,2,3", help="comma-separated gather times (s) to compare")
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0, help="wall time per policy")
    parser.add_argument("--scale", type=float, default=0.5, help="every duration is multiplied by this")
    parser.add_argument("--cpu-s", type=float, default=0.6, help="start, load and parent work outside the device")
    parser.add_argument("--first-call-s", type=float, default=2.19)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--request-s", type=float, default=0.12)
    parser.add_argument("--hold-s", type=float, default=0.62)
    parser.add_argument("--long-hold-s", type=float, default=8.7)
    parser.add_argument("--long-every", type=int, default=18, help="one hold in N is long; 0: none")
    parser.add_argument("--profile-s", type=float, default=0.1, help="the profiler's request, after the measurement")
    args = parser.parse_args()
    rows = []
    for gather in (float(g) for g in args.gather.split(",")):
        with tempfile.TemporaryDirectory() as d:
            rows.append(run_policy(args, gather, Path(d)))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]["per_minute"] or 1.0
    print(json.dumps({"summary": {str(r["gather_s"]): round(r["per_minute"] / base, 2) for r in rows}}))


if __name__ == "__main__":
    main()
