"""Per-evaluation wall time by phase, and repeatability of the speedup, with a warm evaluator.

    python bench/eval_wall.py bundled --repeats 3
    python bench/eval_wall.py kernelbench --problems KB/KernelBench --repeats 5
    python bench/eval_wall.py repeat --problems KB/KernelBench --problem level1/19_ReLU --times 10
    python bench/eval_wall.py repeat --problems services/bundled/problems --kernels services/bundled/kernels \
        --problem level1/1_ReLU

`bundled` evaluates the bundled problems with their example kernels; `kernelbench` evaluates real
KernelBench level-1 problems at their published sizes with the honest Triton kernels under
bench/kernels/kernelbench; `repeat` evaluates one candidate N times (fresh children every time) and
reports the coefficient of variation of the speedup. Prints a JSON line per evaluation and a summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.evaluator import Evaluator  # noqa: E402
from services.problems import ProblemSet, bundled_kernel, bundled_problems  # noqa: E402
from services.schema import EvalOptions  # noqa: E402

KB_KERNELS = ROOT / "bench" / "kernels" / "kernelbench"
KB_DEFAULT = [
    "level1/19_ReLU",
    "level1/36_RMSNorm_",
    "level1/47_Sum_reduction_over_a_dimension",
    "level1/88_MinGPTNewGelu",
]


def run(evaluator: Evaluator, jobs: list[tuple], options: EvalOptions) -> list[dict]:
    rows = []
    for problem, source in jobs:
        t0 = time.monotonic()
        result = evaluator.evaluate(problem, source, options)
        wall = time.monotonic() - t0
        phases = result.phases
        row = {
            "problem": problem.id,
            "verdict": result.verdict.value,
            "speedup": result.speedup,
            "wall_s": round(wall, 3),
            "wall_excl_compile_s": round(wall - phases.get("compile", 0.0), 3),
            "phases": phases,
            "cand_ms": result.candidate_runtime.median_ms if result.candidate_runtime else None,
            "ref_ms": result.reference_runtime.median_ms if result.reference_runtime else None,
            "trials": result.candidate_runtime.trials if result.candidate_runtime else None,
            "gpu": result.environment.gpu_name,
            "failed": [f"{c.name}: {c.detail}" for c in result.failed_checks()],
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
    parser.add_argument("--problems", type=Path, help="KernelBench problem directory (holds level1/)")
    parser.add_argument("--kernels", type=Path, default=KB_KERNELS, help="candidates, laid out like --problems")
    parser.add_argument("--problem", action="append", help="problem id (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--device", choices=["cuda", "cpu"])
    parser.add_argument("--budget", type=float, help="timing budget per evaluation, seconds")
    args = parser.parse_args()
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
        ps = ProblemSet(args.problems)
        ids = args.problem or KB_DEFAULT
        if args.mode == "kernelbench":
            for i in ids:
                source = (args.kernels / f"{i}.py").read_text()
                rows = run(evaluator, [(ps.load(i), source)] * args.repeats, options)
                print("SUMMARY", i, json.dumps(phase_summary(rows)))
            return
        for i in ids:
            source = (args.kernels / f"{i}.py").read_text()
            rows = run(evaluator, [(ps.load(i), source)] * args.times, options)
            speedups = [r["speedup"] for r in rows if r["speedup"] is not None]
            cand = [r["cand_ms"] for r in rows if r["cand_ms"] is not None]
            cv = statistics.stdev(speedups) / statistics.fmean(speedups) if len(speedups) > 1 else None
            print(
                "REPEAT",
                i,
                json.dumps(
                    {
                        "n": len(speedups),
                        "speedup_median": statistics.median(speedups),
                        "speedup_min": min(speedups),
                        "speedup_max": max(speedups),
                        "speedup_cv": cv,
                        "cand_median_ms": statistics.median(cand),
                    }
                ),
            )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
