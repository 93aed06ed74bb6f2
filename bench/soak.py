"""Soak: many honest evaluations through the whole service, counting false verdicts (target: 0 rejected).

    python bench/soak.py --evaluations 500 --device-class h100 --gpus 0 --out /tmp/soak.jsonl
    python bench/soak.py --evaluations 500 --device-class h100 --max-minutes 8   # what finishes in 8 minutes
    python bench/soak.py --evaluations 20 --device-class cpu                      # the same path on CPU

The workload is honest kernels only: every bundled problem's example kernel and every honest control of
tests/corpus that lists the soak's device, taken in turn until `--evaluations`. A comment makes each submission
new, so the service's result cache never answers and every evaluation runs in its own fresh reference and
candidate children. The path is the service's: HTTP gateway, Redis, Celery worker (one per GPU, with its
default evaluations in flight, whose timing and profiling take turns in the GPU's timing slot), the evaluation
core, with stored reference timings on as deployed. The options are the defaults except a shorter timing budget
(`--timing-budget-s`) and fewer correctness trials (`--trials`), so that 500 evaluations fit in minutes; every
defence, the profile and the output-dependence check still run.

Prints progress, then one JSON summary: evaluations per verdict, per kernel, the wall time and the median
phases. Every evaluation that did not pass is printed with its failed checks, their measured values and
thresholds. `--out` keeps one JSON line per evaluation. Exit status 1 if any honest evaluation did not pass.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gym_client import KernelGymClient  # noqa: E402
from kernelgym.stack import LocalStack  # noqa: E402
from services.problems import bundled_kernel, bundled_problems  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"


def honest_kernels(device: str) -> list[tuple[str, str, str]]:
    """(name, problem id, source) of every honest kernel that runs on `device`."""
    kernels = [(f"bundled/{pid}", pid, bundled_kernel(pid).read_text()) for pid in bundled_problems().ids()]
    for path in sorted(CORPUS.glob("honest_*.py")):
        source = path.read_text()
        meta = dict(
            line.split(":", 1)
            for line in (ast.get_docstring(ast.parse(source)) or "").splitlines()
            if line.split(":", 1)[0] in ("problem", "devices")
        )
        if device in (d.strip() for d in meta["devices"].split(",")):
            kernels.append((f"corpus/{path.stem}", meta["problem"].strip(), source))
    return kernels


def failed_checks(result: dict) -> list[dict]:
    return [
        {k: c.get(k) for k in ("name", "detail", "measured", "thresholds")}
        for c in result.get("checks", [])
        if not c["passed"] and not c.get("advisory")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evaluations", type=int, default=500)
    parser.add_argument("--device-class", default="h100", help="`cpu` runs the same path with the interpreter")
    parser.add_argument("--gpus", default="0", help="comma-separated GPU indices (ignored for the `cpu` class)")
    parser.add_argument(
        "--timing-budget-s", type=float, default=0.5, help="cap on the adaptive timing loop (service default 10 s)"
    )
    parser.add_argument("--trials", type=int, default=3, help="correctness trials (service default 5)")
    parser.add_argument("--out", type=Path, help="one JSON line per evaluation")
    parser.add_argument("--logs", type=Path, help="keep the stack's Redis, gateway and worker logs here")
    parser.add_argument(
        "--max-minutes",
        type=float,
        help="stop waiting after this long, cancel what has not finished and report what has (a bounded run)",
    )
    args = parser.parse_args()

    cpu = args.device_class == "cpu"
    kernels = honest_kernels("cpu" if cpu else "cuda")
    jobs = [kernels[i % len(kernels)] for i in range(args.evaluations)]
    options = {"timing_budget_s": args.timing_budget_s, "correctness_trials": args.trials}
    gpus = [None] if cpu else [int(g) for g in args.gpus.split(",")]
    env = {"KERNELGYM_BATCH_MAX": str(max(256, len(jobs)))}
    verdicts: Counter[str] = Counter()
    per_kernel: dict[str, Counter[str]] = {}
    phases: list[dict[str, float]] = []
    bad = []
    out = args.out.open("w") if args.out else None
    with LocalStack(args.logs, device_class=args.device_class, env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        for gpu in gpus:
            stack.start_worker(gpu=gpu)
        stack.wait_ready(workers=len(gpus), timeout=300)
        with KernelGymClient(stack.base_url, timeout=60) as gym:
            t0 = time.monotonic()
            submitted = gym.evaluate_batch(
                [
                    gym.submission(f"{src}\n# soak {uuid.uuid4().hex}\n", problem_id=pid, options=options)
                    for _, pid, src in jobs
                ],
                wait=0,
            )
            deadline = t0 + 60 * args.max_minutes if args.max_minutes else math.inf
            unfinished = 0
            for n, ((name, pid, _), sub) in enumerate(zip(jobs, submitted, strict=True), 1):
                left = deadline - time.monotonic()
                e = gym.wait(sub.id, timeout=min(3600, max(0.0, left)))
                if e.status in ("queued", "running"):  # past --max-minutes: this one and the rest are cut
                    for later in submitted[n - 1 :]:
                        gym.cancel(later.id)
                    unfinished = len(jobs) - n + 1
                    break
                verdict = e.verdict or e.status
                verdicts[verdict] += 1
                per_kernel.setdefault(name, Counter())[verdict] += 1
                row = {"kernel": name, "problem": pid, "verdict": verdict, "cached": e.cached}
                if e.result:
                    phases.append(e.result["phases"])
                    row |= {"speedup": e.result.get("speedup"), "failed": failed_checks(e.result)}
                if verdict != "passed":
                    row["feedback"] = e.feedback[:1000]
                    bad.append(row)
                    print(json.dumps(row), flush=True)
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                if n % 50 == 0:
                    print(f"{n}/{len(jobs)} done, {time.monotonic() - t0:.0f} s, {dict(verdicts)}", flush=True)
            wall = time.monotonic() - t0
    if out:
        out.close()
    names = sorted({k for p in phases for k in p})
    print(
        json.dumps(
            {
                "evaluations": len(jobs) - unfinished,
                "cancelled_at_the_time_limit": unfinished,
                "kernels": len(kernels),
                "problems": len({pid for _, pid, _ in kernels}),
                "verdicts": dict(verdicts),
                "not_passed": len(bad),
                "rejected": verdicts["rejected"],
                "wall_s": round(wall, 1),
                "per_minute": round(60 * (len(jobs) - unfinished) / wall, 1),
                "phases_median_s": {k: round(statistics.median(p.get(k, 0.0) for p in phases), 3) for k in names},
                "per_kernel": {k: dict(v) for k, v in sorted(per_kernel.items())},
            },
            indent=1,
        )
    )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
