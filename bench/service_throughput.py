"""Evaluations per minute through the whole service (HTTP gateway, Redis, Celery GPU workers) against the
evaluation core called directly, in one run on one machine.

    python bench/service_throughput.py --gpus 0 --per-problem 3            # core vs service, one GPU
    python bench/service_throughput.py --gpus 0,1 --per-problem 3 --skip-core  # one GPU vs two GPUs

The workload is every bundled problem with its example kernel, each submitted `--per-problem` times (a
comment makes each submission new, so the result cache never answers). Modes, in this order:
  * core: one warm `Evaluator` in this process, evaluations one after another;
  * service: Redis + gateway + one worker per GPU listed, all submissions in one `POST /evaluate/batch`,
    then waiting for every result; reference timings are not stored (as in the core mode);
  * service+reftime: the same with stored reference timings on (the service's default);
  * with several GPUs, also the service on the first GPU alone, for the scaling ratio.
Each mode is preceded by a warm-up round (one evaluation per worker) that is not counted. Prints one JSON
line per mode and the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gym_client import KernelGymClient  # noqa: E402
from kernelgym.stack import LocalStack  # noqa: E402
from services.problems import bundled_kernel, bundled_problems  # noqa: E402


def median_phases(phases: list[dict[str, float]]) -> dict[str, float]:
    names = {name for p in phases for name in p}
    return {name: round(statistics.median(p.get(name, 0.0) for p in phases), 3) for name in sorted(names)}


def workload(per_problem: int) -> list[tuple[str, str]]:
    problems = bundled_problems()
    jobs = []
    for _ in range(per_problem):
        for pid in problems.ids():
            jobs.append((pid, bundled_kernel(pid).read_text() + f"\n# {uuid.uuid4().hex}\n"))
    return jobs


def core_mode(jobs: list[tuple[str, str]], device: str) -> dict:
    from services.evaluator import Evaluator
    from services.schema import EvalOptions

    problems = bundled_problems()
    options = EvalOptions(device=device)
    verdicts: dict[str, int] = {}
    phases = []
    with Evaluator() as ev:
        ev.pool.prewarm(device)
        ev.evaluate(problems.load(jobs[0][0]), jobs[0][1] + "\n# warm-up\n", options)
        t0 = time.monotonic()
        for pid, source in jobs:
            result = ev.evaluate(problems.load(pid), source, options)
            verdicts[result.verdict.value] = verdicts.get(result.verdict.value, 0) + 1
            phases.append(result.phases)
        wall = time.monotonic() - t0
    return {
        "mode": "core",
        "gpus": 1,
        "evaluations": len(jobs),
        "wall_s": round(wall, 2),
        "verdicts": verdicts,
        "phases_median_s": median_phases(phases),
    }


def service_mode(
    jobs: list[tuple[str, str]], gpus: list[int], device_class: str, reftime: bool, logs: Path | None
) -> dict:
    env = {"KERNELGYM_BATCH_MAX": str(max(256, len(jobs)))}
    if not reftime:
        env["KERNELGYM_REFERENCE_TIMING_TTL_S"] = "0"
    mode = "service+reftime" if reftime else "service"
    workdir = logs / f"{mode}-{len(gpus)}gpu" if logs else None
    with LocalStack(workdir, device_class=device_class, env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        for gpu in gpus:
            stack.start_worker(gpu=gpu)
        stack.wait_ready(workers=len(gpus), timeout=120)
        with KernelGymClient(stack.base_url, timeout=60) as gym:
            warm = [
                gym.submission(src + f"\n# warm-up {i}\n", problem_id=pid)
                for i, (pid, src) in enumerate(jobs[: len(gpus)])
            ]
            for e in gym.evaluate_batch(warm, wait=0):
                gym.wait(e.id, timeout=600)
            t0 = time.monotonic()
            submitted = gym.evaluate_batch([gym.submission(src, problem_id=pid) for pid, src in jobs], wait=0)
            finished = [gym.wait(e.id, timeout=60 * len(jobs)) for e in submitted]
            wall = time.monotonic() - t0
    verdicts: dict[str, int] = {}
    cached = 0
    for e in finished:
        verdicts[e.verdict or e.status] = verdicts.get(e.verdict or e.status, 0) + 1
        cached += bool(e.result and e.result.get("timings_from_cache"))
    return {
        "mode": mode,
        "gpus": len(gpus),
        "evaluations": len(jobs),
        "wall_s": round(wall, 2),
        "verdicts": verdicts,
        "reference_timings_reused": cached,
        "phases_median_s": median_phases([e.result["phases"] for e in finished if e.result]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="0", help="comma-separated GPU indices, one worker each")
    parser.add_argument("--per-problem", type=int, default=3)
    parser.add_argument("--device-class", default="gpu", help="`cpu` runs the same path with the interpreter")
    parser.add_argument("--skip-core", action="store_true", help="only the service modes")
    parser.add_argument("--skip-reftime", action="store_true", help="no run with stored reference timings")
    parser.add_argument("--logs", type=Path, help="keep each stack's Redis, gateway and worker logs here")
    args = parser.parse_args()
    gpus = [int(g) for g in args.gpus.split(",")]
    jobs = workload(args.per_problem)
    runs = []
    if not args.skip_core:
        runs.append(lambda: core_mode(jobs, "cpu" if args.device_class == "cpu" else "cuda"))
    if len(gpus) > 1:
        runs.append(lambda: service_mode(jobs, gpus[:1], args.device_class, False, args.logs))
    runs.append(lambda: service_mode(jobs, gpus, args.device_class, False, args.logs))
    if not args.skip_reftime:
        runs.append(lambda: service_mode(jobs, gpus, args.device_class, True, args.logs))
    rows = []
    for run in runs:
        row = run()
        row["per_minute"] = round(60 * row["evaluations"] / row["wall_s"], 2)
        print(json.dumps(row), flush=True)
        rows.append(row)
    by = {(r["mode"], r["gpus"]): r["per_minute"] for r in rows}
    n = len(gpus)
    if ("core", 1) in by and ("service", 1) in by:
        print(f"service overhead vs core (1 GPU): {1 - by[('service', 1)] / by[('core', 1)]:+.1%}")
    if n > 1:
        print(f"scaling {n} GPUs vs 1: {by[('service', n)] / by[('service', 1)]:.2f}x")
    if ("service+reftime", n) in by:
        print(f"stored reference timings vs none ({n} GPU): {by[('service+reftime', n)] / by[('service', n)]:.2f}x")


if __name__ == "__main__":
    main()
