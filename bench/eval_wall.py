"""Per-evaluation wall time by phase, and repeatability of the speedup, with a warm evaluator.

    python bench/eval_wall.py bundled --repeats 3
    python bench/eval_wall.py kernelbench --problems KB/KernelBench --repeats 5
    python bench/eval_wall.py repeat                      # 40 evaluations of the 96x300 row sum (torch reduction)
    python bench/eval_wall.py repeat --problems KB/KernelBench --problem level1/19_ReLU --times 40
    python bench/eval_wall.py repeat --problems services/bundled/problems --kernels services/bundled/kernels \
        --problem level1/1_ReLU --no-store
    python bench/eval_wall.py repeat --busy 0,16           # the same, alternating with 16 busy processes beside
    python bench/eval_wall.py repeat --device cuda --neighbour none,contexts,evaluator   # another GPU's work, in turn

`bundled` evaluates the bundled problems with their example kernels; `kernelbench` evaluates real
KernelBench level-1 problems at their published sizes with the honest Triton kernels under
bench/kernels/kernelbench; `repeat` evaluates one candidate N times (fresh children every time) and
reports the coefficient of variation of the speedup. By default the evaluations share a reference-timing
store, as a service's workers share one in Redis: the first times the reference in several processes, the
others revalidate and reuse it; `--no-store` times the reference afresh in every evaluation. `--busy` takes
levels of CPU contention (processes spinning beside the evaluator, as a pipelined worker's other evaluations
load the host) and gives the evaluations to them in turn, so that each level's summary, with the phases that split
the timing slot's hold, comes from the same stretch of time. `--neighbour` does the same with work on another GPU
of the host (`--neighbour-gpu`), which this evaluator's GPU does not share but the host's driver does: `contexts`,
a loop of fresh processes that each create a CUDA context there, as a second worker's warm children do; and
`evaluator`, this same repeat run there, as a second GPU's worker does (on two GPUs through the service, requests
outside the timing slot took 1.2-3.7 times as long as on one: docs/benchmarks.md). Prints a JSON line
per evaluation and a summary per condition, with the median seconds of each kind of request to the children.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
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
        result, diagnostics = evaluator.evaluate(problem, source, options, store)
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
            "requests": diagnostics.requests,
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
    parser.add_argument(
        "--neighbour",
        default="none",
        help=f"repeat: comma-separated work on another GPU, in turn: {', '.join(NEIGHBOURS)}",
    )
    parser.add_argument("--neighbour-gpu", type=int, default=1, help="the other GPU's index")
    args = parser.parse_args()
    levels = [int(n) for n in args.busy.split(",")]
    neighbours = args.neighbour.split(",")
    unknown = sorted(set(neighbours) - set(NEIGHBOURS))
    if unknown:
        parser.error(f"unknown --neighbour {unknown}: choose from {', '.join(NEIGHBOURS)}")
    conditions = list(itertools.product(levels, neighbours))
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
            by_condition: dict[tuple[int, str], list[dict]] = {c: [] for c in conditions}
            others = [k for k in neighbours if k != "none"]
            beside = [("busy", None)] * max(levels) + [(k, args.neighbour_gpu) for k in others]
            with paused_processes(beside, i, args) as resume:
                for k in range(args.times):
                    n, neighbour = conditions[k % len(conditions)]
                    resume([*range(n), *(max(levels) + j for j, o in enumerate(others) if o == neighbour)])
                    by_condition[(n, neighbour)] += run(evaluator, [(ps.load(i), source)], options, store)
            for (n, neighbour), rows in by_condition.items():
                label = [i] + [f"busy={n}"] * (len(levels) > 1) + [f"neighbour={neighbour}"] * (len(neighbours) > 1)
                summary = {**repeat_summary(rows), "phases_median_s": phase_summary(rows)}
                print("REPEAT", *label, json.dumps({**summary, "requests_median_s": request_medians(rows)}))


# A neighbour that creates a CUDA context, again and again, each in a fresh process.
_CONTEXTS = (
    "import subprocess, sys\n"
    "while True:\n"
    "    subprocess.run([sys.executable, '-c', 'import torch; torch.empty(1, device=\"cuda\")'], check=False)\n"
)
NEIGHBOURS = ("none", "contexts", "evaluator")


def _command(kind: str, problem: str, args: argparse.Namespace) -> list[str]:
    if kind == "busy":
        return [sys.executable, "-c", "while True: pass"]
    if kind == "contexts":
        return [sys.executable, "-c", _CONTEXTS]
    own = [sys.executable, str(Path(__file__).resolve()), "repeat", "--device", "cuda", "--times", "100000"]
    where = ["--problem", problem] + (["--problems", str(args.problems)] if args.problems else [])
    return own + where + (["--kernels", str(args.kernels)] if args.kernels else [])


@contextlib.contextmanager
def paused_processes(kinds: list[tuple[str, int | None]], problem: str, args: argparse.Namespace) -> Iterator:
    """A process group per `(kind, gpu)` (gpu None: the evaluator's own view), all paused; `resume(ks)` lets the
    groups at the indices `ks` run. A whole group stops with its own subprocesses; a neighbour evaluator's children,
    in sessions of their own, finish the request they are on and then wait for their stopped parent."""
    procs = []
    for kind, gpu in kinds:
        env = dict(os.environ) if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
        out = subprocess.DEVNULL
        procs.append(subprocess.Popen(_command(kind, problem, args), env=env, stdout=out, start_new_session=True))

    def resume(running: list[int]) -> None:
        for k, proc in enumerate(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT if k in running else signal.SIGSTOP)

    try:
        resume([])
        yield resume
    finally:
        # SIGINT first: a neighbour evaluator leaves its `with Evaluator()` and closes its children, which live in
        # sessions of their own and would outlive a killed group on the other GPU.
        resume(list(range(len(procs))))
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def request_medians(rows: list[dict]) -> dict[str, float]:
    """Per kind of request to the children (`reference.call`, `candidate.deliver`...), the median over the
    evaluations of its seconds in each."""
    kinds = sorted({k for r in rows for k in r["requests"]})
    return {k: round(statistics.median(r["requests"].get(k, {}).get("s", 0.0) for r in rows), 4) for k in kinds}


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
