"""Evaluations per minute through the whole service (Redis, the HTTP gateway, a worker per GPU), serial and
pipelined, on one GPU or several, in one run, and whether pipelining disturbs the timings.

    python bench/service_throughput.py --serial 3 --pipelined 12                 # bundled problems, one GPU
    python bench/service_throughput.py --serial 3 --pipelined 12 --concurrency default,4
    python bench/service_throughput.py --serial 1 --pipelined 3 --gather 0,1          # the slot's gathering, on/off
    python bench/service_throughput.py --serial 1 --pipelined 3 --precompile 0,1      # the compiler child, off/on
    python bench/service_throughput.py --serial 1 --pipelined 3 --target-ci-ticks 0,1.6  # a tick floor on sampling
    python bench/service_throughput.py --serial 1 --pipelined 3 --fork 0,1            # children forked or exec'd
    python bench/service_throughput.py --serial 3 --pipelined 12 --cold                 # as an RL step on new prompts
    python bench/service_throughput.py --serial 6 --pipelined 6 --wrong 6      # half the candidates fail correctness
    python bench/service_throughput.py --kernelbench .kb/KernelBench --serial 2 --pipelined 0     # published sizes
    python bench/service_throughput.py --serial 0 --pipelined 12 --gpus 1,2     # one GPU against two, one run
    python bench/service_throughput.py --serial 0 --pipelined 8 --gpus 1,2 --kept-references 0,default
    python bench/service_throughput.py --device-class cpu --serial 1 --pipelined 1 --concurrency 2  # smoke test
    python bench/service_throughput.py --kernelbench .kb/KernelBench --only 'level1/9[4-9]_*,level1/100_*' \
        --serial 0 --pipelined 40                                   # KernelBench's losses, 40 each (issue 35)
    python bench/service_throughput.py --problems bench/problems/calibration --kernels bench/kernels/calibration \
        --serial 0 --pipelined 40                          # outputs easy to get wrong, 40 each (issue 35)

The workload is every problem (the bundled ones, or with --kernelbench the KernelBench level-1 problems that
bench/kernels/kernelbench has an honest kernel for, sent with their reference inline; or with `--problems DIR
--kernels DIR` any problem folder's problems that the kernel folder has a kernel for at the same relative path;
`--only` keeps the problem ids that match one of its patterns) with its example kernel,
each submission made distinct by a unique comment, so the result cache never answers and every candidate's
Triton kernels compile afresh. With `--wrong N`, each problem also gets N candidates per mode whose forward() adds
one to the honest kernel's output: they compile, run and fail their first correctness trial, as most candidates of
an RL step do, and hold no timing slot (labelled `<problem> (wrong)`; one that passes is listed in `not_passed`).
A batch holds each problem's candidates together, as the RL client sends a turn's samples (`--order problem`,
the default), or one candidate of each problem in turn (`--order interleaved`); the
uncounted pass is always one of each problem in turn.
Modes, in this order, each on a fresh stack (its own Redis, so each mode measures its own reference timings and
then reuses them, as a service does):
  * serial: a worker with KERNELGYM_WORKER_CONCURRENCY=1, `--serial` candidates per problem (with `--serial 0`
    none: the summary then compares each mode with the first pipelined one);
  * pipelined: a worker with each `--concurrency` (`default`: the worker's own choice), each `--gather` (how
    long a measurement lets other evaluations' requests run on first), each `--precompile` (whether a compiler
    child compiles the candidate's kernels before its first call), each `--target-ci-ticks` (a floor, in ticks
    of the event timer, under the precision adaptive sampling stops at) and each `--fork` (whether children are
    forked from the zygote or each started as a fresh interpreter), each `--kept-references` (idle reference
    children a pool process keeps for its problems' next candidates), each `--profile-calls` (the profiler
    sessions of the coverage check), `--pipelined` per problem, with a worker on
    each of `--gpus` GPUs (each count a mode: 2 is GPUs `--gpu` and `--gpu`+1; the workers share one queue).
With `--abba` the modes then run again in reverse order, each named `-again`.
Every mode first runs a pass that is not counted, as many evaluations per problem as the mode has pool processes:
it times and stores each problem's reference, and leaves the pool processes as a long run has them (each has built
Triton's launchers for the problems' kernels; a mode whose processes started cold paid that in its batch, and on two
H200s a two-GPU mode was 1.26x one GPU that way). It then waits until every pool process has its warm children
again; then all its submissions go in one POST /evaluate/batch and it waits for every result. With
--share-references the reference timings the first mode stored are written into each later mode's Redis before its
pass (the same figures then serve every mode, so speedups differ between modes only by the candidates' timings, and
a mode costs minutes less on a GPU, where timing a reference takes 5 processes). With --cold there is no uncounted
pass: the batch meets references nobody has timed, as an RL step does when its prompts are new, and one evaluation
per problem times each reference (in several processes) while that problem's other candidates wait for its figure.
Prints each mode's progress on stderr (a run stopped at a time limit shows where its time went, and every 40
results the verdicts so far by problem), one JSON line per mode (evaluations per minute, verdicts, verdicts by
problem, phase medians, each stage's share of the evaluations' time, the share of the wall time the timing slot
was held and the median wait for it, the host's CPU use during the batch, the requests to the children by kind,
per-problem speedups, when each evaluation finished) and a summary: the ratio to serial and, per problem, how far
the pipelined median speedup is from the serial one, and each mode's rate over as many evaluations as the one that
counted fewest finished (`first_n_per_minute`).
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import itertools
import json
import math
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from provenance import commit  # noqa: E402

from gym_client import KernelGymClient  # noqa: E402
from kernelgym.stack import LocalStack  # noqa: E402
from services.problems import ProblemSet, bundled_kernel, bundled_problems  # noqa: E402
from services.stats import SLOW_PLACEMENT_REL, median_ci  # noqa: E402

KB_KERNELS = ROOT / "bench" / "kernels" / "kernelbench"
# The evaluation's own hold of the timing slot, by part, and its hold while a new reference is timed in more processes.
HELD = ("timing_warm_up", "timing_revalidation", "timing_sampling", "timing_checks", "timing_reference_processes")
PHASES = (
    *("start", "load", "precompile", "compile", "first_call", "correctness", "timing", "profile", "total"),
    *HELD,
    *("timing_rechecks", "timing_reference_release", "timing_reference_starts"),  # in `timing`, not held
    "timing_reference_waits",  # in `timing_reference_starts`: for other evaluations' measurements
    "timing_reference_calls",  # in the held parts: the reference's own timed calls, every process's
    *("start_ready_wait", "start_drain"),  # what `start` waited for
    "closing",  # outside `total`: the parent's buffers given back, the children gone
    *("memory_wait", "earlier_attempts"),  # outside `total`, on a shared GPU
    "reference_wait",  # for another evaluation's timing of the same new reference
)
# The stages of services.evaluator that do not overlap (`compile` is taken out of `correctness`, `reference_wait`
# out of `timing`; `first_call` includes the compile, the `timing_*` parts are inside `timing`): each one's share of
# the evaluations' time.
STAGES = ("start", "load", "precompile", "compile", "correctness", "reference_wait", "timing", "profile", "dependence")
OUTSIDE_TOTAL = ("closing", "memory_wait", "earlier_attempts")


def workload(problem_dir: Path | None, kernel_dir: Path = KB_KERNELS, only: str | None = None) -> list[dict]:
    """One submission body per problem (without the unique comment): the bundled problems, or each kernel under
    `kernel_dir` with the problem of the same relative path under `problem_dir`, its reference sent inline;
    `only`: comma-separated fnmatch patterns of the problem ids to keep."""
    if problem_dir is None:
        return [{"problem_id": pid, "candidate": bundled_kernel(pid).read_text()} for pid in bundled_problems().ids()]
    problems = ProblemSet(problem_dir)
    kernels = {k.relative_to(kernel_dir).with_suffix("").as_posix(): k for k in sorted(kernel_dir.rglob("*.py"))}
    if only is not None:
        patterns = only.split(",")
        kernels = {pid: k for pid, k in kernels.items() if any(fnmatch.fnmatchcase(pid, p) for p in patterns)}
    if not kernels:
        raise SystemExit(f"no kernel under {kernel_dir} for the problems asked for (--only {only!r})")
    return [
        {"reference": problems.load(pid).source, "candidate": k.read_text(), "label": pid} for pid, k in kernels.items()
    ]


# Appended to an honest kernel: a wrong answer that costs what a correct one does until its first comparison.
WRONG = """

_kg_forward = ModelNew.forward


def _kg_off_by_one(self, *args):
    return _kg_forward(self, *args) + 1


ModelNew.forward = _kg_off_by_one
"""
WRONG_LABEL = " (wrong)"


def submissions(
    gym: KernelGymClient, problems: list[dict], per_problem: int, wrong: int = 0, order: str = "problem"
) -> list[tuple[str, dict]]:
    """`per_problem` honest and `wrong` wrong candidates per problem, each with its label: by problem (`order`
    "problem", as the RL client sends a turn's samples: rl_client.rollout) or one of each problem in turn."""
    out = []
    rounds = range(max(per_problem, wrong))
    pairs = (
        [(n, p) for p in problems for n in rounds] if order == "problem" else [(n, p) for n in rounds for p in problems]
    )
    for n, p in pairs:
        label = p.get("label") or p["problem_id"]
        kinds = [("", "")] * (n < per_problem) + [(WRONG_LABEL, WRONG)] * (n < wrong)
        for suffix, tail in kinds:
            source = p["candidate"] + tail + f"\n# {uuid.uuid4().hex}\n"
            body = gym.submission(source, problem_id=p.get("problem_id"), reference=p.get("reference"))
            out.append((label + suffix, body))
    return out


def wait_warm(stack: LocalStack, warm_children: int, timeout: float = 300) -> int:
    """Until every pool process reports all its warm children ready; returns how many pool processes."""
    r = redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + timeout
    while True:
        beats = [r.hgetall(k) for k in r.scan_iter(match="kg:worker:*")]
        if beats and all(int(b.get(b"warm_children", b"0")) >= warm_children for b in beats):
            return len(beats)
        if time.monotonic() > deadline:
            raise RuntimeError(f"warm children not ready after {timeout} s; see {stack.dir}")
        time.sleep(0.5)


def finished_entries(stack_dir: Path) -> dict[str, list[dict]]:
    """Each worker's log entries of finished evaluations, by log name."""
    return {
        log.name: [json.loads(line) for line in log.read_text().splitlines() if '"evaluation finished"' in line]
        for log in sorted(stack_dir.glob("worker*.log"))
    }


def slot_use(stack_dir: Path, before: dict[str, int], expected: int, timeout: float = 30) -> list[dict]:
    """The workers' figures (slot waited and held, GPU work waited, timed calls, whether the stored reference
    timing was reused) for the `expected` evaluations they finished after each log held `before` entries. A
    worker logs an evaluation just after its result is stored, so the last entries may trail the results."""
    deadline = time.monotonic() + timeout
    while True:
        new = [
            e | {"worker": name}
            for name, entries in finished_entries(stack_dir).items()
            for e in entries[before.get(name, 0) :]
        ]
        if len(new) >= expected or time.monotonic() > deadline:
            return new
        time.sleep(0.2)


def long_holds(slot: list[dict], over_s: float = 3.0) -> dict:
    """The evaluations that held the slot longer than `over_s`, which problems they were; of those with a result,
    how many did not reuse the stored reference timing (the reference is then timed in several processes) and their
    median timed calls."""
    long = [e for e in slot if e["timing_slot_held_s"] > over_s]
    timed = [e for e in long if "timed_calls" in e]
    calls = [e["timed_calls"]["candidate"] for e in timed if "candidate" in e["timed_calls"]]
    return {
        "over_s": over_s,
        "count": len(long),
        "held_s": round(sum(e["timing_slot_held_s"] for e in long), 1),
        "problems": sorted({e.get("problem_id", "?") for e in long}),
        "reference_not_reused": sum("reference" not in e["timings_from_cache"] for e in timed),
        "candidate_calls_median": statistics.median(calls) if calls else None,
    }


def gpu_requests(slot: list[dict]) -> dict:
    """What the device's measurements waited for: each evaluation's longest request outside a measurement, by
    what it was (count and median seconds), longest first."""
    by_what: dict[str, list[float]] = {}
    for e in slot:
        longest = e["longest_gpu_request"]
        by_what.setdefault(longest["what"] or "none", []).append(longest["s"])
    rows = {what: {"count": len(v), "median_s": round(statistics.median(v), 3)} for what, v in by_what.items()}
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]["median_s"]))


def device_engagement(slot: list[dict], most: int = 8) -> dict:
    """How each worker's GPU was held over the span its evaluations' intervals cover (`gpu_busy`, one clock for
    the host): by a measurement, by requests alone (some evaluation's GPU work outside a measurement), or by
    nothing (its evaluations all on host work, or between evaluations), as shares averaged over the workers (one a
    GPU here); and the seconds each request held the device, summed over evaluations (overlaps count in each), the
    `most` longest. Where the device is seldom free, more evaluations in flight cannot add throughput."""
    by_worker: dict[str, list[tuple[float, float, str]]] = {}
    for e in slot:
        by_worker.setdefault(e.get("worker", ""), []).extend((a, b, what) for a, b, what in e.get("gpu_busy", []))
    shares, request_s = [], Counter()
    for spans in by_worker.values():
        if not spans:
            continue
        span = max(b for _, b, _ in spans) - min(a for a, _, _ in spans)
        if span <= 0:
            continue
        held = union_s([(a, b) for a, b, what in spans if what == "measurement"])
        busy = union_s([(a, b) for a, b, _ in spans])
        shares.append((held / span, (busy - held) / span, 1 - busy / span, span))
        for a, b, what in spans:
            if what != "measurement":
                request_s[what] += b - a
    if not shares:
        return {}
    return {
        "measurement": round(statistics.fmean(x[0] for x in shares), 3),
        "requests_only": round(statistics.fmean(x[1] for x in shares), 3),
        "free": round(statistics.fmean(x[2] for x in shares), 3),
        "span_s": round(sum(x[3] for x in shares), 1),
        "request_s": {what: round(sec, 2) for what, sec in request_s.most_common(most)},
    }


def placement_neighbours(slot: list[dict]) -> dict:
    """Each placement a side was timed over, set beside the GPU children of its worker (the same GPU) that
    started (a context and the device warm-up) or ended (a context torn down, memory given back) while its calls
    ran: for slow placements (more than `SLOW_PLACEMENT_REL` over the side's fastest in that evaluation) and fast
    ones, how many overlapped a start, an end, both or neither. Where the slow ones overlap such work far more
    often than the fast ones, that work is what slows them."""
    events: dict[str, list[list]] = {}
    for e in slot:
        events.setdefault(e.get("worker", ""), []).extend(e.get("child_events", []))
    counts = {"slow": Counter(), "fast": Counter()}
    for e in slot:
        sides: dict[str, list[tuple[float, float, float]]] = {}
        for side, a, b, ms in e.get("placement_windows", []):
            sides.setdefault(side, []).append((a, b, ms))
        for windows in sides.values():
            fastest = min(ms for _, _, ms in windows)
            for a, b, ms in windows:
                beside = {kind for kind, t0, t1 in events.get(e.get("worker", ""), []) if t0 < b and t1 > a}
                slow = "slow" if ms > fastest * (1 + SLOW_PLACEMENT_REL) else "fast"
                counts[slow]["+".join(sorted(beside)) or "neither"] += 1
    return {kind: dict(sorted(c.items())) for kind, c in counts.items()}


def gpu_children(slot: list[dict]) -> dict:
    """The GPU children the workers saw gone (one `end` event each, from its close until it was gone), for the
    host: how many, how many a second over the span the children's events cover and per evaluation, and the median
    seconds from close to gone. The host's NVIDIA driver creates and tears down every GPU's contexts in turn
    (bench/context_churn.py measures how many children a second a host can start and end). `start` events are
    not counted: each is one stretch of a child's start between its waits for measurements, several a child."""
    events = [(kind, a, b) for e in slot for kind, a, b in e.get("child_events", [])]
    ends = [b - a for kind, a, b in events if kind == "end"]
    span = max((b for _, _, b in events), default=0.0) - min((a for _, a, _ in events), default=0.0)
    if not ends or span <= 0:
        return {}
    return {
        "ended": len(ends),
        "ended_per_s": round(len(ends) / span, 2),
        "per_evaluation": round(len(ends) / len(slot), 2),
        "end_median_s": round(statistics.median(ends), 3),
    }


def union_s(spans: list[tuple[float, float]]) -> float:
    """The length of the union of intervals."""
    total, end = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def worker_seconds(slot: list[dict]) -> dict:
    """Per verdict, the mean seconds a worker spent in the evaluator and storing the outcome, from its log: what
    the results' phases (`total` and what comes on top) leave out is the worker's own."""
    groups: dict[str, list[dict]] = {}
    for e in slot:
        if "evaluate_s" in e:
            groups.setdefault(e.get("verdict") or e.get("status", "?"), []).append(e)
    return {
        verdict: {
            "n": len(es),
            "evaluate_s_mean": round(statistics.fmean(e["evaluate_s"] for e in es), 3),
            "store_s_mean": round(statistics.fmean(e["store_s"] for e in es), 3),
        }
        for verdict, es in sorted(groups.items())
    }


def requests_by_kind(slot: list[dict]) -> dict:
    """Where an evaluation's time outside its measurement goes: per kind of request to a child (child and
    command), the median count and seconds per evaluation (waits for GPU turns excluded), and the mean seconds a
    passed evaluation spent in them (what grows when a host's GPUs slow each other), most seconds first."""
    kinds = sorted({kind for e in slot for kind in e.get("requests", {})})
    passed = [e for e in slot if e.get("verdict") == "passed"]
    rows = {}
    for kind in kinds:
        per = [e.get("requests", {}).get(kind, {"n": 0, "s": 0.0}) for e in slot]
        rows[kind] = {
            "n_median": statistics.median(r["n"] for r in per),
            "s_median": round(statistics.median(r["s"] for r in per), 4),
            "s_mean_passed": round(
                statistics.fmean(e.get("requests", {}).get(kind, {"s": 0.0})["s"] for e in passed), 4
            )
            if passed
            else None,
        }
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]["s_median"]))


def expected_outcome(label: str) -> str:
    """The verdict a candidate of this bench should get: incorrect for a `--wrong` one, else passed."""
    return "incorrect" if label.endswith(WRONG_LABEL) else "passed"


def verdict_counts(jobs: list[tuple[str, dict]], finished: list) -> dict[str, dict[str, int]]:
    """Per problem label, how many of the evaluations finished so far got each verdict (or status)."""
    counts: dict[str, dict[str, int]] = {}
    for (label, _), e in zip(jobs, finished, strict=False):
        outcome = e.verdict or e.status
        counts.setdefault(label, {})[outcome] = counts.get(label, {}).get(outcome, 0) + 1
    return dict(sorted(counts.items()))


def not_passed(
    jobs: list[tuple[str, dict]], finished: list, expected: Callable[[str], str] = expected_outcome
) -> list[dict]:
    """Each evaluation whose outcome is not the one its candidate should get (`expected` of its label): its label,
    status or verdict, and the first lines of why, so that a failing mode says what failed without its logs."""
    return [
        {"label": label, "outcome": e.verdict or e.status, "why": e.feedback[:400]}
        for (label, _), e in zip(jobs, finished, strict=True)
        if e.verdict != expected(label)
    ]


def stage_shares(results: list[dict]) -> dict:
    """Each stage's share of the evaluations' whole time (their `total` phases, waits for device memory and
    attempts started again with more of it, summed), `other` for what no stage covers (the static triage, closing
    the children), and that time in seconds as `evaluations_s`."""
    total = sum(r["phases"].get(p, 0.0) for r in results for p in ("total", *OUTSIDE_TOTAL))
    if total <= 0:
        return {}
    shares = {s: round(sum(r["phases"].get(s, 0.0) for r in results) / total, 4) for s in (*STAGES, *OUTSIDE_TOTAL)}
    shares = {s: v for s, v in shares.items() if v > 0}
    return {**shares, "other": round(1 - sum(shares.values()), 4), "evaluations_s": round(total, 1)}


def by_verdict(results: list[dict]) -> dict[str, dict]:
    """Per verdict: how many, their median `total` and `stage_shares`, since failures and passes spend their time
    so differently that the mix's shares hide where either goes."""
    groups: dict[str, list[dict]] = {}
    for r in results:
        groups.setdefault(r["verdict"], []).append(r)
    return {
        verdict: {
            "n": len(rs),
            "total_median_s": round(statistics.median(r["phases"].get("total", 0.0) for r in rs), 3),
            # beside the worker's `evaluate_s_mean` (`worker_s`): what the phases cover of its time
            "whole_mean_s": round(
                statistics.fmean(sum(r["phases"].get(p, 0.0) for p in ("total", *OUTSIDE_TOTAL)) for r in rs), 3
            ),
            "stage_share": stage_shares(rs),
        }
        for verdict, rs in sorted(groups.items())
    }


def new_references(labelled: list[tuple[str, dict]]) -> dict:
    """The evaluations (label, result) that timed their reference in full (not from a stored timing): how many per
    problem, the label up to its " [" suffix (one, where candidates of a problem wait for the first's figure), in
    how many processes (placements, where the tensors are large), and the device time: the hold while the
    reference was timed in more processes, the evaluation's whole hold of the slot (its candidate's interleaved
    calls included), and the reference's timed calls themselves (their wall time in every process, the harness's
    part included), against the target of 2 s a new reference (1 s for a reference under 1 ms a call)."""
    pairs = [
        (label.split(" [", 1)[0], r)
        for label, r in labelled
        if r.get("reference_runtime")
        and "reference" not in r.get("timings_from_cache", [])
        and r["reference_runtime"]["processes"] > 1
    ]
    if not pairs:
        return {"evaluations": 0}
    per_problem = Counter(problem for problem, _ in pairs)
    timed = [r for _, r in pairs]
    hold = [sum(r["phases"].get(p, 0.0) for p in HELD) for r in timed]
    more = [r["phases"].get("timing_reference_processes", 0.0) for r in timed]
    calls = {problem: reference_calls_s(r) for problem, r in pairs}
    over = {p: round(s, 3) for p, (s, target) in calls.items() if s > target}
    return {
        "evaluations": len(timed),
        "problems": len(per_problem),
        "timed_more_than_once": sorted(p for p, n in per_problem.items() if n > 1),
        "processes": dict(sorted(Counter(r["reference_runtime"]["processes"] for r in timed).items())),
        "more_processes_s": {"median": round(statistics.median(more), 3), "max": round(max(more), 3)},
        "whole_hold_s": {"median": round(statistics.median(hold), 3), "max": round(max(hold), 3)},
        "reference_calls_s": {
            "median": round(statistics.median(s for s, _ in calls.values()), 3),
            "max": round(max(s for s, _ in calls.values()), 3),
            "over_target": dict(sorted(over.items())),
        },
    }


def reference_calls_s(result: dict) -> tuple[float, float]:
    """The device time of a reference's timed calls in every process (`timing_reference_calls`), and its target:
    1 s for a reference under 1 ms a call, else 2 s."""
    spent = result["phases"].get("timing_reference_calls", 0.0)
    return spent, 1.0 if result["reference_runtime"]["median_ms"] < 1.0 else 2.0


def precompile_passes(slot: list[dict]) -> dict | None:
    """What the compiler child did for each evaluation (services.parent.precompile), from the worker's log."""
    passes = [e["precompile"] for e in slot if "precompile" in e]
    if not passes:
        return None
    stopped = [p["stopped"] for p in passes if p["stopped"]]
    return {
        "passes": len(passes),
        "kernels_median": statistics.median(p["kernels"] for p in passes),
        "stopped_early": len(stopped),
        "stopped_examples": sorted(set(stopped))[:3],
    }


def host_cpu() -> tuple[int, int] | None:
    """The host's CPU time so far, busy and in all, in ticks (Linux /proc/stat); None elsewhere."""
    try:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def cpu_busy(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the host's CPU time that was busy between two `host_cpu` readings."""
    if before is None or after is None or after[1] == before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 3)


def progress(name: str, step: str, since: float) -> None:
    """On stderr: where a mode is, so that a run stopped at a time limit still shows where its time went."""
    print(f"[{name}] {step} at {time.monotonic() - since:.0f} s", file=sys.stderr, flush=True)


def stored_references(stack: LocalStack) -> dict[bytes, tuple[bytes, int]]:
    """The reference timings the stack's Redis holds, with their remaining lifetimes (ms)."""
    r = redis.Redis.from_url(stack.redis_url)
    found = {k: (r.get(k), r.pttl(k)) for k in r.scan_iter(match="*:reftime:*")}
    return {k: (value, ttl) for k, (value, ttl) in found.items() if value is not None}


def run_mode(
    name: str,
    problems: list[dict],
    per_problem: int,
    args: argparse.Namespace,
    env: dict,
    references: dict[bytes, tuple[bytes, int]],
    gpus: int = 1,
    batch: Callable[[KernelGymClient], list[tuple[str, dict]]] | None = None,
    expected: Callable[[str], str] = expected_outcome,
    cut_s: float | None = None,
) -> dict:
    """One mode on a fresh stack with a worker on each of `gpus` GPUs. `references`: reference timings to start
    from, filled with the ones this mode stored when it is empty and --share-references is on. `batch`: the
    counted submissions with their labels (default: `per_problem` honest and `--wrong` wrong ones per problem);
    `expected`: the verdict a label should get. `cut_s`: count only the evaluations finished this many seconds
    after the batch went in (the rest are `unfinished`), so that a mode longer than the time at hand still
    yields its rate."""
    env = {"KERNELGYM_BATCH_MAX": "1024", **env}
    workdir = args.logs / name if args.logs else None
    began = time.monotonic()
    with LocalStack(workdir, device_class=args.device_class, env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        for i in range(gpus):
            stack.start_worker(gpu=None if args.gpu is None else args.gpu + i)
        stack.wait_ready(workers=gpus, timeout=300)
        progress(name, "stack ready", began)
        with KernelGymClient(stack.base_url, timeout=120) as gym:
            r = redis.Redis.from_url(stack.redis_url)
            for key, (value, ttl_ms) in references.items():
                r.set(key, value, px=ttl_ms if ttl_ms > 0 else None)
            processes = wait_warm(stack, args.warm_children)
            if not args.cold:
                warm = gym.evaluate_batch(
                    [b for _, b in submissions(gym, problems, processes, order="interleaved")], wait=0
                )
                for e in warm:
                    gym.wait(e.id, timeout=1800)
                progress(name, "uncounted pass done", began)
                if args.share_references and not references:
                    references.update(stored_references(stack))
                wait_warm(stack, args.warm_children)
            progress(name, "warm children ready", began)
            jobs = batch(gym) if batch else submissions(gym, problems, per_problem, args.wrong, args.order)
            before = {name: len(entries) for name, entries in finished_entries(stack.dir).items()}
            cpu_before = host_cpu()
            t0, sent = time.monotonic(), time.time()  # the service stamps `finished` by the host's wall clock
            submitted = gym.evaluate_batch([b for _, b in jobs], wait=0)
            cut = t0 + (3600 if cut_s is None else cut_s)
            finished = []
            for (label, _), e in zip(jobs, submitted, strict=True):
                finished.append(done := gym.wait(e.id, timeout=max(0.0, cut - time.monotonic())))
                if not done.finished:  # past the cut: its state now, not counted
                    continue
                if done.verdict != expected(label):  # now, so that a run cut at its limit still says why
                    progress(name, f"{label}: {done.verdict or done.status}: {done.feedback[-600:]!r}", began)
                if len(finished) % 40 == 0 and len(finished) < len(jobs):
                    so_far = verdict_counts(jobs, finished)
                    progress(name, f"{len(finished)} of {len(jobs)} results {json.dumps(so_far)}", began)
            wall = time.monotonic() - t0
            cpu_after = host_cpu()
            counted = [(job, e) for job, e in zip(jobs, finished, strict=True) if e.finished]
            unfinished = len(jobs) - len(counted)
            if not counted:
                raise RuntimeError(f"{name}: no evaluation finished within the cut of {cut_s} s")
            jobs, finished = [job for job, _ in counted], [e for _, e in counted]
            progress(name, f"batch done ({unfinished} unfinished)" if unfinished else "batch done", began)
        slot = slot_use(stack.dir, before, len(jobs))
    results = [e.result for e in finished if e.result]
    by_problem = verdict_counts(jobs, finished)
    verdicts: dict[str, int] = {}
    for counts in by_problem.values():
        for outcome, n in counts.items():
            verdicts[outcome] = verdicts.get(outcome, 0) + n
    speedups: dict[str, list[float]] = {}
    timings: dict[str, list[dict]] = {}  # each speedup's sides: medians per process or placement, and the GPU
    for (label, _), e in zip(jobs, finished, strict=True):
        if e.result and e.result.get("speedup") is not None:
            speedups.setdefault(label, []).append(e.result["speedup"])
            timings.setdefault(label, []).append(
                {side: e.result[f"{side}_runtime"]["process_medians_ms"] for side in ("reference", "candidate")}
                | {"reused": e.result["timings_from_cache"], "gpu_uuid": e.result["environment"]["gpu_uuid"]}
            )
    phases = {p: [r["phases"][p] for r in results if p in r["phases"]] for p in PHASES}
    return {
        "mode": name,
        "gpus": gpus,
        "pool_processes": processes,
        "evaluations": len(jobs),
        "unfinished": unfinished,
        "wall_s": round(wall, 2),
        "per_minute": round(60 * len(jobs) / wall, 2),
        # When each counted evaluation finished, in seconds after the batch went in (`first_n_rates`).
        "finished_s": sorted(round(e.raw["finished"] - sent, 2) for e in finished),
        "per_minute_per_gpu": round(60 * len(jobs) / wall / gpus, 2),
        "verdicts": verdicts,
        "verdicts_by_problem": by_problem,
        "not_passed": not_passed(jobs, finished, expected),
        "host_cpu_busy": cpu_busy(cpu_before, cpu_after),
        "timing_slot": {  # busy_fraction: per GPU (each has its own slot)
            "busy_fraction": round(sum(e["timing_slot_held_s"] for e in slot) / wall / gpus, 3),
            "wait_median_s": round(statistics.median(e["timing_slot_wait_s"] for e in slot), 3),
            "held_median_s": round(statistics.median(e["timing_slot_held_s"] for e in slot), 3),
            "drain_wait_median_s": round(statistics.median(e["timing_slot_drain_s"] for e in slot), 3),
            "gpu_work_wait_median_s": round(statistics.median(e["gpu_wait_s"] for e in slot), 3),
            "memory_retries": sum(e.get("memory_retries", 0) for e in slot),
            "memory_units_median": statistics.median(e.get("memory_units", 0) for e in slot),
            # Units kept while a new reference was timed in further processes, where an evaluation gave some back.
            "memory_units_kept": sorted(e["memory_units_kept"] for e in slot if e.get("memory_units_kept")),
            "reference_kept": sum(e.get("reference_kept", False) for e in slot),
            "memory_wait_s": round(sum(e.get("memory_wait_s", 0.0) for e in slot), 1),
            "long_holds": long_holds(slot),
            "longest_gpu_requests": gpu_requests(slot),
            "device_engagement": device_engagement(slot),
            "placement_neighbours": placement_neighbours(slot),
            "gpu_children": gpu_children(slot),
        },
        "requests": requests_by_kind(slot),
        "worker_s": worker_seconds(slot),
        "precompile": precompile_passes(slot),
        "reference_timings_reused": sum(bool(r.get("timings_from_cache")) for r in results),
        "new_references": new_references(
            [(label, e.result) for (label, _), e in zip(jobs, finished, strict=True) if e.result]
        ),
        "phase_median_s": {p: round(statistics.median(v), 3) for p, v in phases.items() if v},
        "stage_share": stage_shares(results),
        "by_verdict": by_verdict(results),
        "phase_max_s": {p: round(max(v), 3) for p, v in phases.items() if v},
        "speedup": {
            label: {
                "n": len(v),
                "median": round(statistics.median(v), 4),
                "min": round(min(v), 4),
                "max": round(max(v), 4),
                "cv": round(statistics.stdev(v) / statistics.fmean(v), 4) if len(v) > 1 else None,
                "median_ci95": [round(x, 4) for x in median_ci(v)],
            }
            for label, v in sorted(speedups.items())
        },
        "timings": dict(sorted(timings.items())),
        "placements": slow_placements(timings),
        "gpu": next((r["environment"]["gpu_name"] for r in results if r["environment"].get("gpu_name")), None),
    }


def slow_placements(timings: dict[str, list[dict]]) -> dict:
    """Over the sides timed over several placements of their inputs: how often each placement (by its order) was
    the fastest, and how often it was more than 5% slower than the fastest. Whether slow placements come from the
    placement or from when it ran shows in which of them are slow."""
    sides = [medians for rows in timings.values() for row in rows for medians in (row["reference"], row["candidate"])]
    sides = [m for m in sides if len(m) > 1]
    most = max((len(m) for m in sides), default=0)
    return {
        "sides": len(sides),
        "fastest": [sum(len(m) > i and m[i] == min(m) for m in sides) for i in range(most)],
        "slower_by_5pct": [
            sum(len(m) > i and m[i] > min(m) * (1 + SLOW_PLACEMENT_REL) for m in sides) for i in range(most)
        ],
    }


def first_n_rates(rows: list[dict]) -> dict:
    """Each mode's rate over the first `n` evaluations it finished, `n` the fewest any mode counted. A cut counts
    whole evaluations, and where a long one (a new reference timed) straddles it, modes that differ by less than it
    finish the same number: the time they took for the same `n` still tells them apart."""
    n = min(len(r["finished_s"]) for r in rows)
    return {"n": n} | {r["mode"]: round(60 * n / r["finished_s"][n - 1], 2) for r in rows if n}


def abba_order(modes: list[tuple]) -> list[tuple]:
    """The modes (each a tuple whose first item is its name), then the same in reverse order, named `-again`: A B B A,
    so that a machine's drift and the modes' order weigh on each alike."""
    return modes + [(f"{mode[0]}-again", *mode[1:]) for mode in reversed(modes)]


def summary(rows: list[dict]) -> dict:
    """Each mode against the first (serial, or with `--serial 0` the first pipelined mode): `vs_serial` and
    `speedup_vs_serial` are relative to it. `speedup_vs_serial_range` bounds each difference by the two medians'
    95% intervals (distribution-free, services.stats.median_ci; together about 99%), and `beyond_2pct` names the
    problems whose whole range lies outside ±2%: a difference the sample sizes cannot explain. With 12 candidates
    a side and a speedup CV of 2%, two medians differ by up to about 2% by chance alone."""
    serial, rest = rows[0], rows[1:]
    out = {}
    for row in rest:
        shared = [label for label in serial["speedup"] if label in row["speedup"]]
        agreement = {
            label: round(row["speedup"][label]["median"] / serial["speedup"][label]["median"] - 1, 4)
            for label in shared
        }
        ranges = {label: _ratio_range(row["speedup"][label], serial["speedup"][label]) for label in shared}
        out[row["mode"]] = {
            "per_minute": row["per_minute"],
            "vs_serial": round(row["per_minute"] / serial["per_minute"], 2),
            "speedup_vs_serial": agreement,
            "worst_speedup_difference": max((abs(v) for v in agreement.values()), default=None),
            "speedup_vs_serial_range": ranges,
            "beyond_2pct": [label for label, (lo, hi) in ranges.items() if lo > 0.02 or hi < -0.02],
        }
    return out


def _ratio_range(mode: dict, serial: dict) -> list[float]:
    """The range of `mode`'s median over `serial`'s, minus one, that the two medians' 95% intervals allow."""
    (lo, hi), (s_lo, s_hi) = mode["median_ci95"], serial["median_ci95"]
    return [round(lo / s_hi - 1, 4), round(hi / s_lo - 1, 4)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serial", type=int, default=3, help="candidates per problem, serial mode; 0: none")
    parser.add_argument("--pipelined", type=int, default=12, help="candidates per problem per pipelined mode; 0: none")
    parser.add_argument(
        "--concurrency", default="default", help="pipelined modes: comma-separated counts, or `default`"
    )
    parser.add_argument(
        "--gather",
        default="default",
        help="pipelined modes: comma-separated KERNELGYM_DEVICE_LOCK_GATHER_S values, or `default` (each with "
        "each --concurrency, so that policies are compared in one run)",
    )
    parser.add_argument(
        "--precompile",
        default="default",
        help="pipelined modes: comma-separated KERNELGYM_PRECOMPILE values (0, 1), or `default`",
    )
    parser.add_argument(
        "--target-ci-ticks",
        default="default",
        help="pipelined modes: comma-separated KERNELGYM_TARGET_CI_TICKS values (e.g. 0,1.6), or `default`",
    )
    parser.add_argument(
        "--fork", default="default", help="pipelined modes: comma-separated KERNELGYM_FORK_CHILDREN values (0, 1)"
    )
    parser.add_argument(
        "--abba",
        action="store_true",
        help="run the modes, then again in reverse order (A B B A): compare modes by their two runs' mean rate",
    )
    parser.add_argument("--gpu", type=int, default=0, help="the GPU's index (ignored with --device-class cpu)")
    parser.add_argument(
        "--gpus", default="1", help="pipelined modes: comma-separated numbers of GPUs, a worker on each, from --gpu"
    )
    parser.add_argument("--device-class", default="gpu", help="`cpu` runs the same path with the interpreter")
    parser.add_argument(
        "--kernelbench",
        "--problems",
        dest="problems",
        type=Path,
        help="a problem folder (KernelBench's holds level1/) instead of the bundled problems",
    )
    parser.add_argument(
        "--kernels", type=Path, default=KB_KERNELS, help="with --problems: the honest kernels, by problem id"
    )
    parser.add_argument("--only", help="with --problems: comma-separated fnmatch patterns of problem ids to run")
    parser.add_argument("--warm-children", type=int, default=4, help="KERNELGYM_WARM_CHILDREN of the worker")
    parser.add_argument("--gpu-memory-mb", type=int, help="KERNELGYM_WORKER_GPU_MEMORY_MB of the worker")
    parser.add_argument("--wrong", type=int, default=0, help="wrong candidates per problem per mode, besides")
    parser.add_argument("--cold", action="store_true", help="no uncounted pass: references are timed in the batch")
    parser.add_argument(
        "--share-references", action="store_true", help="the first mode's reference timings start every later one"
    )
    parser.add_argument(
        "--order",
        choices=("problem", "interleaved"),
        default="problem",
        help="the batch's candidates by problem, as an RL step sends them, or one of each problem in turn",
    )
    parser.add_argument(
        "--kept-references",
        default="default",
        help="comma-separated KERNELGYM_REFERENCE_CHILDREN_KEPT values, one mode each (`default`: the worker's)",
    )
    parser.add_argument(
        "--profile-calls",
        default="default",
        help="comma-separated KERNELGYM_PROFILE_CALLS values, one mode each: profiler sessions an evaluation runs",
    )
    parser.add_argument("--logs", type=Path, help="keep each stack's Redis, gateway and worker logs here")
    args = parser.parse_args()
    if args.device_class == "cpu":
        args.gpu = None
    problems = workload(args.problems, args.kernels.resolve(), args.only)
    common = {"KERNELGYM_WARM_CHILDREN": str(args.warm_children)}
    if args.gpu_memory_mb:
        common["KERNELGYM_WORKER_GPU_MEMORY_MB"] = str(args.gpu_memory_mb)
    head = {"date": datetime.date.today().isoformat(), "commit": commit(), "problems": len(problems)}
    head |= {"cold": args.cold, "wrong": args.wrong, "order": args.order}
    print(json.dumps(head))
    modes = [("serial", args.serial, {"KERNELGYM_WORKER_CONCURRENCY": "1"}, 1)] if args.serial else []
    variables = (
        ("", "KERNELGYM_WORKER_CONCURRENCY", args.concurrency),
        ("gather", "KERNELGYM_DEVICE_LOCK_GATHER_S", args.gather),
        ("precompile", "KERNELGYM_PRECOMPILE", args.precompile),
        ("ticks", "KERNELGYM_TARGET_CI_TICKS", args.target_ci_ticks),
        ("fork", "KERNELGYM_FORK_CHILDREN", args.fork),
        ("kept", "KERNELGYM_REFERENCE_CHILDREN_KEPT", args.kept_references),
        ("profiled", "KERNELGYM_PROFILE_CALLS", args.profile_calls),
    )
    gpu_counts = [1] if args.device_class == "cpu" else [int(n) for n in args.gpus.split(",")]
    product = itertools.product(gpu_counts, *(v.split(",") for _, _, v in variables)) if args.pipelined else []
    for gpus, *values in product:
        env = {var: value for (_, var, _), value in zip(variables, values, strict=True) if value != "default"}
        name = (
            "pipelined-"
            + values[0]
            + "".join(
                f"-{label}-{value}"
                for (label, _, _), value in zip(variables[1:], values[1:], strict=True)
                if value != "default"
            )
            + (f"-gpus-{gpus}" if len(gpu_counts) > 1 or gpus > 1 else "")
        )
        modes.append((name, args.pipelined, env, gpus))
    if args.abba:
        modes = abba_order(modes)
    rows = []
    references: dict[bytes, tuple[bytes, int]] = {}
    for name, per_problem, env, gpus in modes:
        row = run_mode(name, problems, per_problem, args, {**common, **env}, references, gpus)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(json.dumps({"summary": summary(rows), "first_n_per_minute": first_n_rates(rows)}))


if __name__ == "__main__":
    main()
