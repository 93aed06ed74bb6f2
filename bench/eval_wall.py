"""Per-evaluation wall time by phase, and repeatability of the speedup, with a warm evaluator.

    python bench/eval_wall.py bundled --repeats 3
    python bench/eval_wall.py kernelbench --problems KB/KernelBench --repeats 5
    python bench/eval_wall.py repeat                      # 40 evaluations of the 96x300 row sum (torch reduction)
    python bench/eval_wall.py repeat --problems KB/KernelBench --problem level1/19_ReLU --times 40
    python bench/eval_wall.py repeat --problems services/bundled/problems --kernels services/bundled/kernels \
        --problem level1/1_ReLU --no-store
    python bench/eval_wall.py repeat --busy 0,16           # the same, alternating with 16 busy processes beside

`bundled` evaluates the bundled problems with their example kernels; `kernelbench` evaluates real
KernelBench level-1 problems at their published sizes with the honest Triton kernels under
bench/kernels/kernelbench; `repeat` evaluates one candidate N times (fresh children every time) and
reports the coefficient of variation of the speedup. By default the evaluations share a reference-timing
store, as a service's workers share one in Redis: the first times the reference in several processes, the
others revalidate and reuse it; `--no-store` times the reference afresh in every evaluation. `--busy` takes
levels of CPU contention (processes spinning beside the evaluator, as a pipelined worker's other evaluations
load the host) and gives the evaluations to them in turn, so that each level's summary, with the phases that split
the timing slot's hold, comes from the same stretch of time. Prints a JSON line per evaluation and a summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.evaluator import Evaluator  # noqa: E402
from services.problems import ProblemSet, bundled_kernel, bundled_problems  # noqa: E402
from services.schema import EvalOptions  # noqa: E402
from services.timing_cache import MemoryTimingStore, TimingStore  # noqa: E402

KB_KERNELS = ROOT / "bench" / "kernels" / "kernelbench"
SMALL_PROBLEMS = ROOT / "bench" / "problems" / "small"
SMALL_KERNELS = ROOT / "bench" / "kernels" / "small"
SMALL_DEFAULT = ["level1/96x300_row_sum"]
KB_DEFAULT = [
    "level1/19_ReLU",
    "level1/36_RMSNorm_",
    "level1/47_Sum_reduction_over_a_dimension",
    "level1/88_MinGPTNewGelu",
]


def run(evaluator: Evaluator, jobs: list[tuple], options: EvalOptions, store: TimingStore | None = None) -> list[dict]:
    rows = []
    for problem, source in jobs:
        t0 = time.monotonic()
        result = evaluator.evaluate(problem, source, options, store)
        wall = time.monotonic() - t0
        phases = result.phases
        cand, ref = result.candidate_runtime, result.reference_runtime
        row = {
            "problem": problem.id,
            "verdict": result.verdict.value,
            "speedup": result.speedup,
            "wall_s": round(wall, 3),
            "wall_excl_compile_s": round(wall - phases.get("compile", 0.0), 3),
            "phases": phases,
            "cand_ms": cand.median_ms if cand else None,
            "ref_ms": ref.median_ms if ref else None,
            "trials": cand.trials if cand else None,
            "cand_ci_rel": cand.ci95_rel_halfwidth if cand else None,
            "ref_ci_rel": ref.ci95_rel_halfwidth if ref else None,
            "ref_process_medians_ms": ref.process_medians_ms if ref else None,
            "reused": result.timings_from_cache,
            "gpu": result.environment.gpu_name,
            "failed": [f"{c.name}: {c.detail}" for c in result.failed_checks()],
            # Requests to the children by child and command: count, seconds without waits for GPU turns.
            "requests": evaluator.last_requests,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def phase_summary(rows: list[dict]) -> dict:
    keys = sorted({k for r in rows for k in r["phases"]})
    out = {k: round(statistics.median(r["phases"].get(k, 0.0) for r in rows), 3) for k in keys}
    out["wall_excl_compile_median_s"] = round(statistics.median(r["wall_excl_compile_s"] for r in rows), 3)
    out["wall_excl_compile_max_s"] = round(max(r["wall_excl_compile_s"] for r in rows), 3)
    out["evaluations"] = len(rows)
    out["verdicts"] = sorted({r["verdict"] for r in rows})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["bundled", "kernelbench", "repeat"])
    parser.add_argument("--problems", type=Path, help="problem directory (holds level1/); repeat: the small set")
    parser.add_argument("--kernels", type=Path, help="candidates, laid out like --problems")
    parser.add_argument("--problem", action="append", help="problem id (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--times", type=int, default=40)
    parser.add_argument("--no-store", action="store_true", help="repeat: no shared reference-timing store")
    parser.add_argument("--device", choices=["cuda", "cpu"])
    parser.add_argument("--budget", type=float, help="timing budget per evaluation, seconds")
    parser.add_argument("--busy", default="0", help="repeat: comma-separated numbers of busy processes, in turn")
    args = parser.parse_args()
    levels = [int(n) for n in args.busy.split(",")]
    options = EvalOptions(device=args.device, timing_budget_s=args.budget)

    with Evaluator() as evaluator:
        evaluator.pool.prewarm(args.device or ("cuda" if _cuda() else "cpu"))
        time.sleep(5)  # let the warm children finish importing torch, as a long-running worker would
        if args.mode == "bundled":
            ps = bundled_problems()
            ids = args.problem or ps.ids()
            jobs = [(ps.load(i), bundled_kernel(i).read_text()) for _ in range(args.repeats) for i in ids]
            rows = run(evaluator, jobs, options)
            print("SUMMARY", json.dumps(phase_summary(rows)))
            return
        if args.mode == "kernelbench":
            ps = ProblemSet(args.problems)
            kernels = args.kernels or KB_KERNELS
            for i in args.problem or KB_DEFAULT:
                source = (kernels / f"{i}.py").read_text()
                rows = run(evaluator, [(ps.load(i), source)] * args.repeats, options)
                print("SUMMARY", i, json.dumps(phase_summary(rows)))
            return
        ps = ProblemSet(args.problems or SMALL_PROBLEMS)
        kernels = args.kernels or (KB_KERNELS if args.problems else SMALL_KERNELS)
        for i in args.problem or (KB_DEFAULT if args.problems else SMALL_DEFAULT):
            source = (kernels / f"{i}.py").read_text()
            store = None if args.no_store else MemoryTimingStore()
            by_level: dict[int, list[dict]] = {n: [] for n in levels}
            with busy_processes(max(levels)) as load:
                for k in range(args.times):
                    n = levels[k % len(levels)]
                    load(n)
                    by_level[n] += run(evaluator, [(ps.load(i), source)], options, store)
            for n, rows in by_level.items():
                label = [i] if len(levels) == 1 else [i, f"busy={n}"]
                print("REPEAT", *label, json.dumps({**repeat_summary(rows), "phases_median_s": phase_summary(rows)}))


@contextlib.contextmanager
def busy_processes(most: int) -> Iterator:
    """`most` processes spinning on the CPU, all paused; `load(n)` lets the first n run."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(most)]

    def load(n: int) -> None:
        for k, proc in enumerate(procs):
            proc.send_signal(signal.SIGCONT if k < n else signal.SIGSTOP)

    try:
        load(0)
        yield load
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def cv(values: list[float]) -> float | None:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None


def repeat_summary(rows: list[dict]) -> dict:
    """Repeatability of one candidate's evaluations: the speedup's coefficient of variation and where it comes
    from (the candidate's medians, the reference's), the precision reached and the time timing took."""
    passed = [r for r in rows if r["speedup"] is not None]
    speedups = [r["speedup"] for r in passed]
    if not passed:  # CPU mode reports no speedup: only the verdicts and the wall time
        return {"n": 0, "verdicts": sorted({r["verdict"] for r in rows}), "wall_s_median": _median_wall(rows)}
    return {
        "n": len(speedups),
        "verdicts": sorted({r["verdict"] for r in rows}),
        "speedup_median": statistics.median(speedups),
        "speedup_min": min(speedups),
        "speedup_max": max(speedups),
        "speedup_cv": cv(speedups),
        "cand_median_ms": statistics.median(r["cand_ms"] for r in passed),
        "cand_cv": cv([r["cand_ms"] for r in passed]),
        "ref_distinct_ms": sorted({round(r["ref_ms"], 6) for r in passed}),
        "ref_cv": cv([r["ref_ms"] for r in passed]),
        "reference_reused": sum(1 for r in passed if "reference" in r["reused"]),
        "cand_ci_rel_median": statistics.median(r["cand_ci_rel"] for r in passed),
        "timing_s_median": statistics.median(r["phases"].get("timing", 0.0) for r in passed),
        "timing_s_total": round(sum(r["phases"].get("timing", 0.0) for r in passed), 2),
        # Adaptive sampling's tail: evaluations that timed for over 3 s, with their timed calls and precision.
        "long_timings": [
            {"timing_s": r["phases"]["timing"], "trials": r["trials"], "cand_ci_rel": round(r["cand_ci_rel"], 4)}
            for r in passed
            if r["phases"].get("timing", 0.0) > 3.0
        ],
        "wall_s_median": _median_wall(rows),
    }


def _median_wall(rows: list[dict]) -> float:
    return statistics.median(r["wall_s"] for r in rows)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
