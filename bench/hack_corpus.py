"""Evaluate the adversarial corpus (tests/corpus) and report catch rate, false positives and defence cost.

    python bench/hack_corpus.py                          # CUDA when available, else CPU
    python bench/hack_corpus.py --device cpu --only a5 --json /tmp/corpus.json
    python bench/hack_corpus.py --cost --repeats 3       # also time defences on vs off
    python bench/hack_corpus.py --shard 1/2              # every second evaluation, to fit a time limit

Prints one row per evaluation: corpus file, hack row, expected outcome, verdict, whether it was caught (a hack
is caught when its verdict is not `passed`; an honest control is "caught" when it passes), the checks that
failed and the wall time. Then:
  * the catch rate over the hacks (target 100%);
  * the false-positive rate over the honest controls plus every bundled honest kernel (target 0%);
  * with --cost, the median wall time per evaluation of the bundled honest kernels with the default settings
    and with `EvalSettings(defences=False)` (when that setting exists), measured interleaved in one run
    (on/off alternating per evaluation, the order flipped every pair), and their ratio.
Files that do not list the device, or need a policy the evaluator lacks, are listed as skipped.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "services")]

import torch  # noqa: E402
from test_hack_corpus import ISOLATED_ROWS, load_corpus, options_for, outcome_ok  # noqa: E402

from services.evaluator import Evaluator  # noqa: E402
from services.problems import bundled_kernel, bundled_problems  # noqa: E402
from services.schema import EvalOptions, Verdict  # noqa: E402
from services.settings import EvalSettings  # noqa: E402

ISOLATED = EvalSettings(load_timeout_s=30, correctness_timeout_s=6, timing_timeout_s=15, warm_children=1)


def bundled_jobs(problems) -> list[tuple]:
    jobs = []
    for pid in problems.ids():
        try:
            jobs.append((pid, bundled_kernel(pid).read_text()))
        except ValueError:  # no example kernel for this problem
            continue
    return jobs


def run_corpus(device: str, only: str | None, shard: tuple[int, int] = (1, 1)) -> list[dict]:
    problems = bundled_problems()
    rows = []
    index, count = shard
    mine = (i % count == index - 1 for i in itertools.count())
    with Evaluator() as main, Evaluator(ISOLATED) as isolated:
        for case in load_corpus():
            if (only and only not in case.name) or not next(mine):
                continue
            row = {
                "file": case.name,
                "row": case.row,
                "expect": case.expect,
                "kind": "honest" if case.honest else "hack",
            }
            if device not in case.devices:
                rows.append({**row, "verdict": "skipped", "caught": None, "failed": [], "seconds": 0.0})
                continue
            ev = isolated if case.row in ISOLATED_ROWS else main
            t0 = time.monotonic()
            result = ev.evaluate(problems.load(case.problem), case.path.read_text(), options_for(case, device)).result
            passed = result.verdict is Verdict.PASSED
            rows.append(
                {
                    **row,
                    "verdict": result.verdict.value,
                    "caught": passed if case.honest else not passed,
                    "as_expected": outcome_ok(case, result),
                    "failed": [c.name for c in result.failed_checks()],
                    "details": [f"{c.name}: {c.detail}" for c in result.failed_checks()],
                    "seconds": round(time.monotonic() - t0, 2),
                }
            )
            print_row(rows[-1])
        if only is None:
            for pid, source in bundled_jobs(problems):
                if not next(mine):
                    continue
                t0 = time.monotonic()
                result = main.evaluate(problems.load(pid), source, EvalOptions(device=device)).result
                passed = result.verdict is Verdict.PASSED
                rows.append(
                    {
                        "file": f"bundled:{pid}",
                        "row": "bundled",
                        "expect": "passed",
                        "kind": "honest",
                        "verdict": result.verdict.value,
                        "caught": passed,
                        "as_expected": passed,
                        "failed": [c.name for c in result.failed_checks()],
                        "details": [f"{c.name}: {c.detail}" for c in result.failed_checks()],
                        "seconds": round(time.monotonic() - t0, 2),
                    }
                )
                print_row(rows[-1])
    return rows


def print_row(r: dict) -> None:
    caught = {True: "yes", False: "NO", None: "-"}[r["caught"]]
    failed = ",".join(r["failed"]) or "-"
    print(f"{r['file']:42} {r['row']:7} {r['expect']:10} {r['verdict']:13} {caught:6} {r['seconds']:7.1f}s  {failed}")
    if r["kind"] == "honest" and r["caught"] is False:
        for detail in r.get("details", []):
            print(f"    {detail[:200]}")


def summarise(rows: list[dict]) -> dict:
    hacks = [r for r in rows if r["kind"] == "hack" and r["caught"] is not None]
    honest = [r for r in rows if r["kind"] == "honest" and r["caught"] is not None]
    caught = sum(r["caught"] for r in hacks)
    false_pos = [r["file"] for r in honest if not r["caught"]]
    return {
        "hacks": len(hacks),
        "caught": caught,
        "catch_rate": caught / len(hacks) if hacks else None,
        "missed": [r["file"] for r in hacks if not r["caught"]],
        "honest": len(honest),
        "false_positive_rate": len(false_pos) / len(honest) if honest else None,
        "false_positives": false_pos,
        "skipped": [r["file"] for r in rows if r["caught"] is None],
    }


def measure_cost(device: str, repeats: int) -> dict:
    problems = bundled_problems()
    jobs = bundled_jobs(problems)
    walls: dict[str, list[float]] = {"on": [], "off": []}
    with Evaluator(EvalSettings()) as on, Evaluator(EvalSettings(defences=False)) as off:
        pair = 0
        for _ in range(repeats):
            for pid, source in jobs:
                order = [("on", on), ("off", off)] if pair % 2 == 0 else [("off", off), ("on", on)]
                pair += 1
                for label, ev in order:
                    t0 = time.monotonic()
                    ev.evaluate(problems.load(pid), source, EvalOptions(device=device))
                    walls[label].append(time.monotonic() - t0)
    med_on, med_off = statistics.median(walls["on"]), statistics.median(walls["off"])
    return {"median_on_s": med_on, "median_off_s": med_off, "ratio": med_on / med_off, **walls}


def parse_shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        k, n = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N, got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"need 1 <= K <= N, got {text!r}")
    return k, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", help="evaluate only corpus files whose name contains this (skips bundled kernels)")
    parser.add_argument("--cost", action="store_true", help="also measure defences on vs off")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over the bundled kernels for --cost")
    parser.add_argument("--shard", type=parse_shard, default=(1, 1), help="K/N: run every N-th evaluation from K")
    parser.add_argument("--no-corpus", action="store_true", help="skip the corpus (with --cost: the cost alone)")
    parser.add_argument("--json", type=Path, help="also write everything as JSON here")
    args = parser.parse_args()

    print(f"{'file':42} {'row':7} {'expected':10} {'verdict':13} {'caught':6} {'wall':>8}  failed checks")
    rows = [] if args.no_corpus else run_corpus(args.device, args.only, args.shard)
    summary = summarise(rows)
    print(f"\ndevice: {args.device}")
    if summary["catch_rate"] is not None:
        print(f"catch rate: {summary['caught']}/{summary['hacks']} = {summary['catch_rate']:.1%} (target 100%)")
        print(f"  missed: {', '.join(summary['missed']) or 'none'}")
    if summary["false_positive_rate"] is not None:
        n_fp = len(summary["false_positives"])
        print(f"false positives: {n_fp}/{summary['honest']} = {summary['false_positive_rate']:.1%} (target 0%)")
        print(f"  rejected honest: {', '.join(summary['false_positives']) or 'none'}")
    print(f"skipped: {', '.join(summary['skipped']) or 'none'}")
    cost = None
    if args.cost:
        cost = measure_cost(args.device, args.repeats)
        print(
            f"defence cost: median {cost['median_on_s']:.2f} s on vs {cost['median_off_s']:.2f} s off "
            f"per evaluation, ratio {cost['ratio']:.2f}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"device": args.device, "rows": rows, "summary": summary, "cost": cost}, indent=2)
        )


if __name__ == "__main__":
    main()
