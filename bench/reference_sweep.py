"""Every KernelBench problem's own reference, evaluated as a candidate: the checks must hold for it.

    python bench/reference_sweep.py --kernelbench PATH/KernelBench [--levels 1 2 3] [--gpus 0,1,2,3]
                                    [--json OUT.json] [--max-minutes 8]

Two candidates a problem, both built from the reference's own source (the problem files are read in place and
never copied into the project):
  * `copy`: `ModelNew` calls the reference's forward and passes each output tensor through a one-line Triton copy
    kernel into a fresh tensor. Correct and honest about its kernel's part: it must get `passed`, with every
    check that stood down listed;
  * `no_triton`: `ModelNew` is the reference itself; it must be `rejected` by the launch rule alone
    (`static_no_triton_kernel` before it runs, or
    `custom_kernel_launched`).
One process a GPU takes every n-th problem (one Evaluator each, default settings and policy). Prints one line an
evaluation and a summary: verdict counts by candidate kind, the problems that missed, and the checks that stood
down with where. Problems not run before `--max-minutes` are listed as not run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.schema import CheckName  # noqa: E402

COPY = """

import triton
import triton.language as tl


@triton.jit
def _kg_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def _kg_through_copy(value):
    if isinstance(value, torch.Tensor):
        src = value.contiguous()
        out = torch.empty_like(src)
        if src.numel():
            _kg_copy[(triton.cdiv(src.numel(), 1024),)](src, out, src.numel(), BLOCK=1024)
        return out
    if isinstance(value, (tuple, list)):
        return type(value)(_kg_through_copy(v) for v in value)
    return value


class ModelNew(Model):
    def forward(self, *args, **kwargs):
        return _kg_through_copy(super().forward(*args, **kwargs))
"""

NO_TRITON = """

class ModelNew(Model):
    pass
"""

EXPECTED = {"copy": "passed", "no_triton": "rejected"}
# The launch rule, before running (no @triton.jit function at all) or while running (none launched).
LAUNCH_RULE = (CheckName.STATIC_NO_TRITON_KERNEL, CheckName.CUSTOM_KERNEL_LAUNCHED)


def problem_ids(root: Path, levels: list[int]) -> list[str]:
    ids = []
    for level in levels:
        files = sorted((root / f"level{level}").glob("*.py"), key=lambda p: int(p.name.split("_")[0]))
        ids += [f"level{level}/{p.stem}" for p in files]
    return ids


def _worker(
    gpu: int, ids: list[str], root: str, device: str, budget_s: float | None, deadline: float, queue: mp.Queue
) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    from services.evaluator import Evaluator
    from services.problems import ProblemSet
    from services.schema import EvalOptions

    problems = ProblemSet(root)
    options = EvalOptions(device=device, timing_budget_s=budget_s)
    with Evaluator() as ev:
        for pid in ids:
            if time.time() > deadline:
                queue.put({"problem": pid, "not_run": True})
                continue
            problem = problems.load(pid)
            for kind, tail in (("copy", COPY), ("no_triton", NO_TRITON)):
                t = time.monotonic()
                try:
                    r = ev.evaluate(problem, problem.source + tail, options).result
                except Exception as exc:  # the reference itself failed: the problem cannot be evaluated here
                    queue.put({"problem": pid, "kind": kind, "verdict": "error", "error": repr(exc)[:300]})
                    break
                queue.put(
                    {
                        "problem": pid,
                        "kind": kind,
                        "gpu": gpu,
                        "verdict": r.verdict.value,
                        "failed": [c.name for c in r.checks if not c.passed and not c.advisory],
                        "stood_down": [c.name for c in r.checks if c.stood_down],
                        "feedback": r.feedback[:400],
                        "wall_s": round(time.monotonic() - t, 2),
                    }
                )
    queue.put(None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", required=True, type=Path, help="the folder holding level1/, level2/, level3/")
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--start", help="the first problem id of the levels to run (those before it are skipped)")
    ap.add_argument("--problem", action="append", default=[], help="a problem id to run first (repeatable)")
    ap.add_argument("--gpus", default="0", help="comma-separated GPU indices, one process each")
    ap.add_argument("--device", default="cuda", help="cpu: the Triton interpreter, for a smoke run on small problems")
    ap.add_argument("--timing-budget-s", type=float, help="a shorter timing cap than the default, for a quicker sweep")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--max-minutes", type=float, default=8.0)
    args = ap.parse_args()

    ids = problem_ids(args.kernelbench, args.levels)
    if args.start:
        ids = ids[ids.index(args.start) :]
    ids = [*args.problem, *(i for i in ids if i not in args.problem)] if args.problem else ids
    gpus = [int(g) for g in args.gpus.split(",")]
    deadline = time.time() + 60 * args.max_minutes
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker,
            args=(g, ids[i :: len(gpus)], str(args.kernelbench), args.device, args.timing_budget_s, deadline, queue),
        )
        for i, g in enumerate(gpus)
    ]
    for p in procs:
        p.start()
    rows, done = [], 0
    while done < len(procs):
        row = queue.get()
        if row is None:
            done += 1
            continue
        rows.append(row)
        print(json.dumps(row), flush=True)
    for p in procs:
        p.join()

    ran = [r for r in rows if not r.get("not_run")]
    print("\nverdicts by candidate:")
    for kind, want in EXPECTED.items():
        counts = Counter(r["verdict"] for r in ran if r.get("kind") == kind)
        print(f"  {kind:10s} (want {want}): {dict(counts)}")
    missed = [r for r in ran if r.get("kind") and r["verdict"] != EXPECTED[r["kind"]]]
    wrong_check = [
        r for r in ran if r.get("kind") == "no_triton" and r["failed"][:1] not in ([LAUNCH_RULE[0]], [LAUNCH_RULE[1]])
    ]
    print(f"missed: {len(missed)}")
    for r in missed + wrong_check:
        print(f"  {r['problem']} {r['kind']}: {r['verdict']} {r.get('failed')} {r.get('feedback', r.get('error'))}")
    stood = Counter(c for r in ran for c in r.get("stood_down", []))
    print(f"stood down: {dict(stood)}")
    for r in ran:
        if r.get("stood_down"):
            print(f"  {r['problem']} {r['kind']}: {r['stood_down']}")
    not_run = [r["problem"] for r in rows if r.get("not_run")]
    print(f"problems run: {len({r['problem'] for r in ran})} of {len(ids)}; not run: {len(not_run)}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "gpus": gpus, "levels": args.levels}, indent=1))


if __name__ == "__main__":
    main()
