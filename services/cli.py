"""`kernelgym`: evaluate a kernel from the command line.

Exit codes: 0 when the evaluation ran (whatever the verdict), 1 when it could not run (the reference
itself fails), 2 for usage errors such as a missing file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from services.problems import ProblemError, ProblemSet, bundled_kernel, bundled_problems, load_problem_file
from services.schema import EvalOptions, EvalResult


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelgym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="evaluate one candidate against one reference")
    ev.add_argument("--reference", type=Path, help="KernelBench-format reference file (defines Model)")
    ev.add_argument("--problems", type=Path, help="problem-set directory laid out like KernelBench")
    ev.add_argument("--problem", help="problem id inside --problems, e.g. level1/19_ReLU")
    ev.add_argument("--candidate", type=Path, required=True, help="file defining ModelNew")
    _common(ev)

    demo = sub.add_parser("demo", help="evaluate the bundled example kernels and print verdicts")
    _common(demo)
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available, else cpu")
    p.add_argument("--json", action="store_true", help="print the result as JSON only")
    p.add_argument("--trials", type=int, help="correctness trials (default from settings)")
    p.add_argument("--no-timing", action="store_true", help="skip the timing phase")
    p.add_argument("--compare-compile", action="store_true", help="also time torch.compile of the reference")


def _options(args: argparse.Namespace) -> EvalOptions:
    return EvalOptions(
        device=args.device,
        correctness_trials=args.trials,
        timing=not args.no_timing,
        compare_compile=args.compare_compile,
    )


def summary(result: EvalResult) -> str:
    lines = [f"{result.problem}: {result.verdict.value.upper()}"]
    if result.speedup is not None:
        lines[0] += f"  speedup {result.speedup:.3f}x"
    failed = result.failed_checks()
    if failed:
        lines.append("  failed checks: " + ", ".join(f"{c.name} ({c.detail})" for c in failed))
    lines.append("  " + result.feedback.replace("\n", "\n  "))
    lines.append("  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.phases.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "eval":
            if args.reference is not None and args.problems is None and args.problem is None:
                problem = load_problem_file(args.reference)
            elif args.reference is None and args.problems is not None and args.problem is not None:
                problem = ProblemSet(args.problems).load(args.problem)
            else:
                print("kernelgym eval: give --reference FILE, or --problems DIR with --problem ID", file=sys.stderr)
                return 2
            if not args.candidate.is_file():
                print(f"kernelgym eval: no such candidate file: {args.candidate}", file=sys.stderr)
                return 2
            jobs = [(problem, args.candidate.read_text())]
        else:
            problems = bundled_problems()
            jobs = [(problems.load(i), bundled_kernel(i).read_text()) for i in problems.ids()]
    except ProblemError as exc:
        print(f"kernelgym: {exc}", file=sys.stderr)
        return 2

    from services.errors import EvaluationError
    from services.evaluator import Evaluator  # torch is imported only when needed
    from services.settings import EvalSettings

    options = _options(args)
    status = 0
    with Evaluator(EvalSettings()) as evaluator:  # this process's one read of the KERNELGYM_* variables
        for problem, source in jobs:
            try:
                result = evaluator.evaluate(problem, source, options).result
            except EvaluationError as exc:
                print(f"kernelgym: {problem.id}: evaluation could not run: {exc}", file=sys.stderr)
                status = 1
                continue
            print(result.model_dump_json(indent=2) if args.json else summary(result), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
