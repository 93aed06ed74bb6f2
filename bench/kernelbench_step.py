"""An RL step on KernelBench through the whole service (issue 34): problems of levels 1 and 2 at their published
sizes, several distinct samples each, every problem's samples sent together in one POST /evaluate/batch.

    python bench/kernelbench_step.py --kernelbench .kb/KernelBench --gpus 1,4 --json step.json
    python bench/kernelbench_step.py --kernelbench .kb/KernelBench --problems 60 --samples 8 --gpus 1
    python bench/kernelbench_step.py --kernelbench .kb/KernelBench --only 'level1/19_*,level2/12_*' --gpus 1
    python bench/kernelbench_step.py --kernelbench .kb/KernelBench --gpus 1 \
        --settings 'default;KERNELGYM_MIN_TIMED_MS=1e9 KERNELGYM_REFERENCE_MIN_PROCESSES=5 KERNELGYM_TARGET_CI_TICKS=0'
    python bench/kernelbench_step.py --device-class cpu --problems-dir services/bundled/problems --problems 2

Problems (read in place, never copied): `--problems N` of `--levels` (default 1,2), split evenly between the
levels; within a level, those that `--kernels` has an honest kernel for first, then the others evenly spread over
the level's numbering. `--only` (comma-separated ids or fnmatch patterns) names them instead. Each problem gets
`--samples K` (default 6), each made distinct by a unique comment so that no cache answers, its reference inline:
  * a third fail early, in turn: one that does not parse, one without `ModelNew`, one whose Triton kernel cannot
    compile (a call inside @triton.jit with an argument tl.load does not take); expected `compile_error`;
  * a third are incorrect: the reference's outputs x through a Triton kernel that writes 2x + 3 (adding one is
    within tolerance where outputs are sums in the thousands, as level2/56's); expected `incorrect`;
  * the rest are correct: the honest kernel where `--kernels` has one, else the reference's outputs through a
    Triton copy (bench/reference_sweep.py's COPY, correct but lazy); expected `passed`.
Each `--gpus` count is a mode on a fresh stack (service_throughput.run_mode: its own Redis, a worker per GPU), for
each of `--settings` (';'-separated, each `default` or space-separated KERNELGYM_*=value for the workers): the
second example compares the default sampling with 20 calls a side, 5 reference processes and no tick floor.
By default the batch meets references nobody has timed, as a step on new prompts does; `--warm` first runs
service_throughput's uncounted pass of correct samples, which times and stores them.

`--cut-minutes M` counts only what finished in a mode's first M minutes (the rest reported as `unfinished`):
the rate of a mode too long for the time at hand, from the same start as a whole one. `--abba` runs the modes and
then again in reverse order (A B B A) and reports each one's mean rate: two minutes of a step moved by about 10%
between runs on one H100 and with the modes' order, more than the settings it compared.

Prints each mode's progress on stderr, one JSON line per mode (evaluations per minute, overall and per GPU;
verdicts, overall and by sample kind; each stage's share of the evaluations' time, from their `phases`; the
per-problem check: its correct samples passed and no other did, with the samples whose verdict was not the
expected one) and a summary line (each mode against one GPU, each GPU count's and settings' mean rate, each mode's
rate over the first n evaluations, n the fewest any mode counted, and how far each problem's median speedup moved
from the first mode's). `--json OUT` writes the modes' whole rows
(service_throughput's, whose `timings` give each speedup's sides as measured: their medians per placement of the
inputs, or per process, and the GPU that timed them) after each mode, and the summary at the end.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import itertools
import json
import uuid
from pathlib import Path

from provenance import commit
from reference_sweep import COPY
from service_throughput import KB_KERNELS, abba_order, first_n_rates, run_mode, summary

from gym_client import KernelGymClient
from services.problems import BUNDLED_KERNELS, BUNDLED_PROBLEMS, ProblemSet

_LOAD = "tl.load(src + offs, mask=offs < n)"


def _variant(old: str, new: str) -> str:
    """COPY with one piece replaced (which must be there)."""
    if old not in COPY:
        raise RuntimeError(f"bench/reference_sweep.py's COPY no longer holds {old!r}")
    return COPY.replace(old, new)


UNPARSABLE = "\n\ndef _kg_unparsable(:\n    pass\n"
NO_MODEL_NEW = _variant("class ModelNew(Model)", "class ModelCopy(Model)")
TRITON_COMPILE_ERROR = _variant(_LOAD, "tl.load(src + offs, mask=offs < n, eviction=1)")
WRONG = _variant(_LOAD, f"{_LOAD} * 2 + 3")

FAIL_EARLY = ("unparsable", "no_model_new", "triton_compile_error")
EXPECTED = {
    **dict.fromkeys(FAIL_EARLY, "compile_error"),
    "incorrect": "incorrect",
    "honest": "passed",
    "copy": "passed",
}
CORRECT = ("honest", "copy")


def level_ids(root: Path, level: int) -> list[str]:
    """The problem ids under `root/level<level>/`, by their leading number as KernelBench numbers them (others
    after, by name)."""
    ids = [i for i in ProblemSet(root).ids() if i.startswith(f"level{level}/")]
    number = [i.split("/", 1)[1].split("_", 1)[0] for i in ids]
    return [i for _, i in sorted(zip(((0, int(n)) if n.isdigit() else (1, 0) for n in number), ids, strict=True))]


def select(root: Path, levels: list[int], count: int, kernels: Path, only: str | None = None) -> list[str]:
    """The problem ids to run: those matching `only`'s patterns, else `count` split evenly between `levels`, the
    ones with an honest kernel under `kernels` first, then the others evenly spread over the level."""
    if only is not None:
        patterns = only.split(",")
        every = [i for level in levels for i in level_ids(root, level)]
        return [i for i in every if any(fnmatch.fnmatchcase(i, p) for p in patterns)]
    chosen = []
    for n, level in enumerate(levels):
        share = count // len(levels) + (n < count % len(levels))
        ids = level_ids(root, level)
        honest = [i for i in ids if (kernels / f"{i}.py").is_file()][:share]
        rest = [i for i in ids if i not in honest]
        wanted = min(share - len(honest), len(rest))
        spread = [rest[k * len(rest) // wanted] for k in range(wanted)] if wanted else []
        chosen += sorted(honest + spread, key=ids.index)
    return chosen


def workload(root: Path, ids: list[str], kernels: Path) -> list[dict]:
    """One entry per problem: its id (`label`), its reference source, and its correct sample (`candidate`, as
    service_throughput's uncounted pass sends it), with `honest` saying which kind that is."""
    problems = ProblemSet(root)
    out = []
    for pid in ids:
        reference = problems.load(pid).source
        kernel = kernels / f"{pid}.py"
        honest = kernel.is_file()
        out.append(
            {
                "label": pid,
                "reference": reference,
                "candidate": kernel.read_text() if honest else reference + COPY,
                "honest": honest,
            }
        )
    return out


def sample_kinds(index: int, k: int) -> list[str]:
    """The kinds of problem `index`'s `k` samples, interleaved: a third fail early (the three ways in turn across
    problems), a third incorrect, the rest correct."""
    third = k // 3
    fail = [FAIL_EARLY[(index * third + j) % len(FAIL_EARLY)] for j in range(third)]
    groups = [["correct"] * (k - 2 * third), ["incorrect"] * third, fail]
    return [g[j] for j in range(k - 2 * third) for g in groups if j < len(g)]


def sample_source(problem: dict, kind: str) -> str:
    """A sample of `kind` for `problem`, made distinct by a unique comment."""
    reference = problem["reference"]
    source = {
        "correct": problem["candidate"],
        "unparsable": problem["candidate"] + UNPARSABLE,
        "no_model_new": reference + NO_MODEL_NEW,
        "triton_compile_error": reference + TRITON_COMPILE_ERROR,
        "incorrect": reference + WRONG,
    }[kind]
    return source + f"\n# {uuid.uuid4().hex}\n"


def step_batch(gym: KernelGymClient, problems: list[dict], k: int, order: str = "problem") -> list[tuple[str, dict]]:
    """The step's submissions, labelled `<problem id> [<kind>]`: each problem's `k` samples together, as a GRPO
    or TRLOO step sends a group (`order` "problem"), or the first sample of every problem, then the second of
    every problem, and so on ("interleaved")."""
    groups = []
    for index, problem in enumerate(problems):
        group = []
        for kind in sample_kinds(index, k):
            named = ("honest" if problem["honest"] else "copy") if kind == "correct" else kind
            body = gym.submission(sample_source(problem, kind), reference=problem["reference"])
            group.append((f"{problem['label']} [{named}]", body))
        groups.append(group)
    if order == "interleaved":
        return [job for wave in itertools.zip_longest(*groups) for job in wave if job is not None]
    return [job for group in groups for job in group]


def split_label(label: str) -> tuple[str, str]:
    """(problem id, sample kind) of a `step_batch` label."""
    pid, kind = label.rsplit(" [", 1)
    return pid, kind.rstrip("]")


def expected(label: str) -> str:
    """The verdict a sample of this label should get."""
    return EXPECTED[split_label(label)[1]]


def verdicts_by_kind(row: dict) -> dict[str, dict[str, int]]:
    """A mode's verdict counts by sample kind."""
    out: dict[str, dict[str, int]] = {}
    for label, counts in row["verdicts_by_problem"].items():
        kind = out.setdefault(split_label(label)[1], {})
        for outcome, n in counts.items():
            kind[outcome] = kind.get(outcome, 0) + n
    return dict(sorted(out.items()))


def problem_check(row: dict) -> dict:
    """Per problem: whether its correct samples all passed and none of its others did; the problems where not,
    with their verdicts by kind."""
    by_problem: dict[str, dict[str, dict[str, int]]] = {}
    for label, counts in row["verdicts_by_problem"].items():
        pid, kind = split_label(label)
        by_problem.setdefault(pid, {})[kind] = counts
    wrong = {pid: kinds for pid, kinds in by_problem.items() if not all(_right(k, c) for k, c in kinds.items())}
    return {"problems": len(by_problem), "right": len(by_problem) - len(wrong), "wrong": wrong}


def _right(kind: str, counts: dict[str, int]) -> bool:
    """Whether samples of `kind` got what the per-problem check asks: all passed if correct, else none."""
    return set(counts) == {"passed"} if kind in CORRECT else "passed" not in counts


def mode_line(row: dict) -> dict:
    """The one-line report of a mode."""
    keys = ("mode", "gpus", "settings", "gpu", "evaluations", "unfinished", "wall_s", "per_minute")
    keys += ("per_minute_per_gpu", "verdicts")
    return {
        **{key: row[key] for key in keys},
        "verdicts_by_kind": row["verdicts_by_kind"],
        "stage_share": row["stage_share"],
        "by_verdict": row["by_verdict"],
        "worker_s": row["worker_s"],
        "new_references": row["new_references"],
        "problem_check": row["problem_check"],
        "unexpected_verdicts": row["not_passed"],
    }


def parse_settings(text: str) -> list[dict[str, str]]:
    """`--settings`: ';'-separated modes, each `default` or space-separated KERNELGYM_*=value pairs."""
    modes = []
    for mode in text.split(";"):
        pairs = [] if mode.strip() == "default" else mode.split()
        bad = [p for p in pairs if not p.startswith("KERNELGYM_") or "=" not in p]
        if bad or not (pairs or mode.strip() == "default"):
            raise SystemExit(f"--settings: {mode!r} is neither `default` nor KERNELGYM_*=value pairs")
        modes.append(dict(p.split("=", 1) for p in pairs))
    return modes


def mode_plan(counts: list[int], settings: list[dict[str, str]], abba: bool) -> list[tuple[str, int, dict[str, str]]]:
    """The modes in the order they run, each (name, GPUs, settings): every GPU count with every settings, and with
    `abba` then the same in reverse (A B B A), so that a machine's drift and the modes' order weigh on each alike."""
    plan = [
        (f"step-gpus-{gpus}" + (f"-settings-{n}" if len(settings) > 1 else ""), gpus, extra)
        for gpus, (n, extra) in itertools.product(counts, enumerate(settings))
    ]
    return abba_order(plan) if abba else plan


def mean_rates(rows: list[dict]) -> dict[str, float]:
    """Evaluations per minute by GPU count and settings, averaged over their modes (two each with --abba)."""
    rates: dict[str, list[float]] = {}
    for r in rows:
        rates.setdefault(f"gpus={r['gpus']} {r['settings']}", []).append(r["per_minute"])
    return {key: round(sum(v) / len(v), 2) for key, v in rates.items()}


def step_summary(rows: list[dict]) -> dict:
    """Each mode's rate against the one-GPU mode of its settings (with its new references' further processes'
    start and waits, and which placements were slow), each GPU count's and settings' mean rate over its modes, and
    (with several modes) how far each problem's median speedup moved from the first mode's
    (service_throughput.summary)."""
    one: dict[str, float] = {}  # settings -> the rate of their first one-GPU mode
    for r in rows:
        if r["gpus"] == 1:
            one.setdefault(r["settings"], r["per_minute"])
    modes = {
        r["mode"]: {
            "gpus": r["gpus"],
            "settings": r["settings"],
            "per_minute": r["per_minute"],
            "per_minute_per_gpu": r["per_minute_per_gpu"],
            "vs_one_gpu": round(r["per_minute"] / one[r["settings"]], 2) if r["settings"] in one else None,
            # A new reference's further processes: starting them, and the part of it spent waiting (medians, s).
            "reference_starts_s": r["phase_median_s"].get("timing_reference_starts"),
            "reference_waits_s": r["phase_median_s"].get("timing_reference_waits"),
            "problems_right": f"{r['problem_check']['right']}/{r['problem_check']['problems']}",
            "unexpected_verdicts": len(r["not_passed"]),
            "placements": r["placements"],
            # Shares of the time the devices were held by a measurement, by requests alone, and free.
            "device": {k: v for k, v in r["timing_slot"]["device_engagement"].items() if k != "request_s"},
            # Slow and fast placements by the GPU children that started or ended beside them.
            "placement_neighbours": r["timing_slot"]["placement_neighbours"],
            # The host's GPU children ended, a second and per evaluation (`gpu_children`).
            "gpu_children": r["timing_slot"]["gpu_children"],
        }
        for r in rows
    }
    against_first = {
        mode: {k: v[k] for k in ("worst_speedup_difference", "beyond_2pct")} for mode, v in summary(rows).items()
    }
    return {
        "modes": modes,
        "mean_per_minute": mean_rates(rows),
        "first_n_per_minute": first_n_rates(rows),
        "speedups_vs_first_mode": against_first,
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--kernelbench", type=Path, help="KernelBench's problem folder (holding level1/, level2/)")
    where.add_argument("--problems-dir", type=Path, help="another problem folder with level folders (a smoke run)")
    parser.add_argument("--problems", type=int, default=40, help="how many problems, split evenly between levels")
    parser.add_argument("--levels", default="1,2", help="comma-separated KernelBench levels")
    parser.add_argument("--only", help="comma-separated problem ids or fnmatch patterns, instead of --problems")
    parser.add_argument("--samples", type=int, default=6, help="samples per problem (a third each kind)")
    parser.add_argument(
        "--order",
        choices=["problem", "interleaved"],
        default="problem",
        help="each problem's samples together (as a step sends a group), or one of each problem in turn",
    )
    parser.add_argument(
        "--kernels",
        type=Path,
        help="honest kernels by problem id (default: bench/kernels/kernelbench; the bundled problems' own)",
    )
    parser.add_argument("--gpus", default="1", help="comma-separated numbers of GPUs, one mode each, from --gpu")
    parser.add_argument(
        "--settings", default="default", help="';'-separated worker settings, one mode each per --gpus count"
    )
    parser.add_argument("--gpu", type=int, default=0, help="the first GPU's index (ignored with --device-class cpu)")
    parser.add_argument("--device-class", default="gpu", help="`cpu` runs the same path with the interpreter")
    parser.add_argument("--warm-children", type=int, default=4, help="KERNELGYM_WARM_CHILDREN of the workers")
    parser.add_argument("--warm", action="store_true", help="time the references in an uncounted pass first")
    parser.add_argument(
        "--share-references", action="store_true", help="with --warm: the first mode's reference timings serve all"
    )
    parser.add_argument(
        "--cut-minutes",
        type=float,
        help="count each mode's evaluations finished this many minutes after its batch went in (the rest are "
        "reported as unfinished): a rate from a mode longer than the time at hand",
    )
    parser.add_argument(
        "--abba",
        action="store_true",
        help="run the modes, then again in reverse order (A B B A), and report each one's mean rate: two minutes of "
        "a step moved by about 10%% between runs and with the modes' order",
    )
    parser.add_argument("--logs", type=Path, help="keep each stack's Redis, gateway and worker logs here")
    parser.add_argument("--json", type=Path, help="write every mode's whole row and the summary here")
    args = parser.parse_args()
    args.root = (args.kernelbench or args.problems_dir).resolve()
    if args.kernels is None:
        args.kernels = BUNDLED_KERNELS if args.root == BUNDLED_PROBLEMS.resolve() else KB_KERNELS
    args.cold = not args.warm
    args.settings = parse_settings(args.settings)
    if args.device_class == "cpu":
        args.gpu = None
    return args


def main() -> None:
    args = parse_args()
    levels = [int(n) for n in args.levels.split(",")]
    ids = select(args.root, levels, args.problems, args.kernels.resolve(), args.only)
    if not ids:
        raise SystemExit(f"no problem of levels {levels} under {args.root} (--only {args.only!r})")
    problems = workload(args.root, ids, args.kernels.resolve())
    head = {"date": datetime.date.today().isoformat(), "commit": commit(), "problems": len(ids)}
    head |= {"samples": args.samples, "honest_kernels": sum(p["honest"] for p in problems), "warm": args.warm}
    head |= {"order": args.order}
    print(json.dumps({**head, "ids": ids}), flush=True)
    env = {"KERNELGYM_WARM_CHILDREN": str(args.warm_children)}
    counts = [1] if args.device_class == "cpu" else [int(n) for n in args.gpus.split(",")]
    rows: list[dict] = []
    references: dict[bytes, tuple[bytes, int]] = {}
    for name, gpus, extra in mode_plan(counts, args.settings, args.abba):
        row = run_mode(
            name,
            problems,
            args.samples,
            args,
            {**env, **extra},
            references,
            gpus,
            batch=lambda gym: step_batch(gym, problems, args.samples, args.order),
            expected=expected,
            cut_s=None if args.cut_minutes is None else 60 * args.cut_minutes,
        )
        row |= {"settings": " ".join(f"{k}={v}" for k, v in extra.items()) or "default"}
        row |= {"verdicts_by_kind": verdicts_by_kind(row), "problem_check": problem_check(row)}
        print(json.dumps(mode_line(row)), flush=True)
        rows.append(row)
        if args.json:  # after every mode: a run stopped at a time limit keeps the modes it finished
            args.json.write_text(json.dumps({**head, "ids": ids, "rows": rows}, indent=1))
    final = step_summary(rows)
    print(json.dumps({"summary": final}), flush=True)
    if args.json:
        args.json.write_text(json.dumps({**head, "ids": ids, "rows": rows, "summary": final}, indent=1))


if __name__ == "__main__":
    main()
