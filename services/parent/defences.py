"""The reward-hacking defences the parent runs around and after the timed calls: re-checks of timed outputs,
replayed outputs, work outside the timed window or on another stream, the roofline floor, and the record of
the guards that stayed silent. The pure judgement lives in `services.parent.evidence`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from services import stats
from services.compare import structure_mismatch
from services.errors import EarlyVerdict
from services.parent import evidence
from services.parent.link import Link
from services.parent.record import Record
from services.protocol.messages import Call, Structure
from services.schema import CheckName, Measure, RuntimeStats, Verdict
from services.settings import EvalSettings


@dataclass(frozen=True)
class OffWindow:
    """Per side, per call: wall time outside the timed events, and the device-sync excess."""

    overheads: dict[str, list[float]]
    extras: dict[str, list[float]]

    def excess(self) -> tuple[float, float]:
        """The candidate's and the reference's time outside the window (20th percentile of calls)."""
        return stats.low_quantile(self.overheads["candidate"]), stats.low_quantile(self.overheads["reference"])

    def side_stream_excess(self) -> float:
        return stats.low_quantile(self.extras["candidate"]) - stats.low_quantile(self.extras["reference"])


@dataclass(frozen=True)
class TimedCall:
    """A timed call of the candidate chosen for a re-check: the seed of its inputs, its output's structure and
    digest, and which of the copies retained in the child holds the output (None: the child's last output)."""

    seed: int
    structure: Structure
    digest: list[int] | None
    retained: int | None = None


def recheck(link: Link, record: Record, call: TimedCall, ref_struct: Structure | None, deadline: float) -> None:
    """Compare a timed call's output with the reference's for the same (unseen) inputs (`ref_struct`: the
    structure of the reference's output in the correctness trials). A retained copy, compared after the
    measurement, must still have the digest its call reported: no later call may mend it."""
    # Buffers are sized by what the reference returned, never by what a candidate's reply claims: an output it
    # says is huge would run the parent out of memory, which counts against the problem (services.evaluator).
    with link.gpu_turn("re-checking a timed call"):  # received and compared in one turn
        same = call.structure == ref_struct
        ref_h, got = link.call_and_receive(
            link.ref,
            Call(seed=call.seed),
            {"output": call.structure} if same else None,
            deadline,
            "re-running the reference",
        )
        cand_out = None
        if call.retained is not None and structure_mismatch(ref_h.structures[0], call.structure) is None:
            cand_out = link.receive_copies([call.retained], ref_h.structures[0], deadline)[0]
        _judge(link, record, call, ref_h.structures[0], got["output"] if got is not None else None, cand_out, deadline)


def recheck_all(
    link: Link, record: Record, calls: list[TimedCall], ref_struct: Structure | None, deadline: float
) -> None:
    """`recheck` for a measurement's chosen calls and its last, in three requests rather than two a call: the
    reference's outputs for every seed in one, the candidate's retained copies in another, its last output in a
    third, all within one turn of the device. One by one where the reference's output is not of one structure
    for every seed."""
    with link.gpu_turn("re-checking timed calls"):  # received and compared in one turn
        ref_outs = link.recompute([c.seed for c in calls], ref_struct, deadline) if ref_struct and calls else None
        if ref_outs is None:
            for call in calls:
                recheck(link, record, call, ref_struct, deadline)
            return
        copied = [
            c.retained for c in calls if c.retained is not None and structure_mismatch(ref_struct, c.structure) is None
        ]
        copies = dict(zip(copied, link.receive_copies(copied, ref_struct, deadline), strict=True)) if copied else {}
        for call, ref_out in zip(calls, ref_outs, strict=True):
            _judge(link, record, call, ref_struct, ref_out, copies.get(call.retained), deadline)


def _judge(
    link: Link,
    record: Record,
    call: TimedCall,
    ref_struct: Structure,
    ref_out: list[torch.Tensor] | None,
    cand_out: list[torch.Tensor] | None,
    deadline: float,
) -> None:
    """One re-check's verdict: a retained copy (`cand_out`) still has its call's digest, and the output matches
    the reference's (`ref_out`; either is received here where None, structures permitting)."""
    if cand_out is not None and call.digest is not None and link.digest(cand_out) != call.digest:
        raise record.fail(
            CheckName.TIMED_OUTPUT_RECHECK,
            "a timed call's output changed after the call returned",
            Verdict.REJECTED,
            "Rejected: the output of a timed call changed after the call returned (outputs must be "
            "complete when forward() returns and stay as they are).",
            measured={"output_changed_after_call": True},
            thresholds={"output_changed_after_call": False},
        )
    msg, measured = link.output_mismatch(ref_struct, call.structure, deadline, cand_out, ref_out)
    if msg is not None:
        raise record.fail(
            CheckName.TIMED_OUTPUT_RECHECK,
            msg,
            Verdict.REJECTED,
            f"Rejected: an output of a timed call was wrong ({msg}) although the "
            "correctness trials passed: outputs must be computed from each "
            "call's inputs (no caching or replay across calls).",
            measured,
            link.tolerance_of(ref_struct),
        )
    record.evidence.rechecks_passed += 1


# Repeats judged per evaluation: groups of candidate calls with one digest, and calls of a group re-run on the
# reference. A replaying candidate repeats on most calls, so the first groups are evidence enough.
MAX_REPEAT_GROUPS = 3
MAX_REPEAT_CALLS = 4


def repeated_seeds(digests: list[tuple[int, tuple[int, ...]]]) -> list[list[int]]:
    """The seeds of calls whose outputs had one digest, a list per digest seen more than once, in call order."""
    by_digest: dict[tuple[int, ...], list[int]] = {}
    for seed, digest in digests:
        by_digest.setdefault(digest, []).append(seed)
    return [seeds for seeds in by_digest.values() if len(seeds) > 1]


def distinct_outputs(link: Link, record: Record, ref_struct: Structure | None, deadline: float) -> None:
    """Calls on different inputs that gave one output digest are a replayed result unless the reference's outputs
    for the same inputs are alike too: a scalar loss or an argmax repeats bit for bit on different inputs, and a
    digest of sums does not tell apart outputs that hold the same values in another order. The reference re-runs
    on the repeating calls' seeds; where its outputs match one another within the tolerance, or have one digest,
    the repeat is what the problem does, and the check stands down for it."""
    groups = repeated_seeds(record.evidence.digests)
    if not groups:
        return
    repeats = sum(len(g) - 1 for g in groups)
    for seeds in groups[:MAX_REPEAT_GROUPS]:
        seeds = seeds[:MAX_REPEAT_CALLS]
        with link.gpu_turn("re-running the reference on repeating calls' seeds"):
            outs = link.recompute(seeds, ref_struct, deadline) if ref_struct else None
            alike = outs is not None and link.alike(outs[0], outs[1:])
        if not alike:
            raise record.fail(
                CheckName.TIMED_OUTPUT_RECHECK,
                f"{repeats} call(s) returned an earlier call's output, where the reference's outputs for the same "
                "inputs differ",
                Verdict.REJECTED,
                "Rejected: some calls returned exactly the output of an earlier call on different inputs, for "
                "which the reference's outputs differ (results cached or replayed across calls).",
                measured={"repeated_outputs": repeats, "outputs": len(record.evidence.digests)},
                thresholds={"repeated_outputs": 0},
            )
    record.stand_down(
        CheckName.TIMED_OUTPUT_RECHECK,
        f"{repeats} repeated output(s) among {len(record.evidence.digests)} calls, and the reference's outputs "
        "for the same inputs are alike too",
        measured={"repeated_outputs": repeats, "outputs": len(record.evidence.digests)},
    )


def _allowed_ms(link: Link, candidate: RuntimeStats) -> float:
    """Per-call time the candidate may spend outside its window beyond the reference's."""
    return link.settings.wall_slack_ms + 0.1 * candidate.median_ms


def off_window_suspect(link: Link, calls: OffWindow, candidate: RuntimeStats, cpu: bool) -> bool:
    cand_over, ref_over = calls.excess()
    return (not cpu and cand_over - ref_over > _allowed_ms(link, candidate)) or (
        link.defended and calls.side_stream_excess() > link.settings.side_stream_slack_ms
    )


def wall_clock_checks(link: Link, record: Record, calls: OffWindow, candidate: RuntimeStats, cpu: bool) -> None:
    """Work hidden outside the timed window adds a constant to each of the candidate's calls; a low quantile
    of the per-call overhead keeps it while ignoring the scheduling spikes of a loaded host. Not compared
    on CPU, where no speedup is reported and so hidden work would gain nothing."""
    n = len(calls.overheads["candidate"])
    if not cpu:
        cand_over, ref_over = calls.excess()
        allowed = _allowed_ms(link, candidate)
        excess = cand_over - ref_over
        if not record.check(
            CheckName.TIMING_WALL_CLOCK,
            excess <= allowed,
            f"per-call time outside the timed window (20th percentile of {n} calls): candidate "
            f"{cand_over:.3f} ms, "
            f"reference {ref_over:.3f} ms, excess {excess:.3f} ms (allowed {allowed:.3f} ms)",
            measured={"excess_ms": excess, "candidate_ms": cand_over, "reference_ms": ref_over, "calls": n},
            thresholds={"excess_ms": allowed},
        ):
            raise EarlyVerdict(
                Verdict.REJECTED,
                "Rejected: the harness's wall clock saw much more time per call "
                "than the candidate's timed window (work outside the timed region).",
            )
    if not link.defended:
        return
    extra = calls.side_stream_excess()
    if not record.check(
        CheckName.NO_SIDE_STREAM_WORK,
        extra <= link.settings.side_stream_slack_ms,
        f"device-wide sync waited {extra:.3f} ms longer than the stream sync (20th percentile of {n} calls)",
        measured={"sync_extra_ms": extra, "calls": n},
        thresholds={"sync_extra_ms": link.settings.side_stream_slack_ms},
    ):
        raise EarlyVerdict(
            Verdict.REJECTED,
            "Rejected: work was still running on another stream after the "
            "timed call returned; launch everything on the current stream.",
        )
    record.check(CheckName.TIMED_OUTPUT_RECHECK, True, f"{record.evidence.rechecks_passed} timed outputs re-checked")


def roofline(
    link: Link,
    record: Record,
    candidate: RuntimeStats,
    reference: RuntimeStats,
    io_bytes: tuple[int, int],
    flops: float,
) -> None:
    """The roofline floor: a candidate time below it is physically impossible, and rejected (GPU only)."""
    s = link.settings
    gpu = torch.cuda.get_device_name(0)
    ok, detail = evidence.roofline_detail(
        gpu, *io_bytes, flops, reference.median_ms, candidate.median_ms, s.roofline_margin
    )
    floor = evidence.physical_floor_ms(gpu, *io_bytes, flops, reference.median_ms)
    measured: dict[str, Measure] = {"candidate_ms": candidate.median_ms}
    thresholds: dict[str, Measure] = {"candidate_ms": s.roofline_margin * floor} if floor is not None else {}
    if not record.check(CheckName.ROOFLINE_FLOOR, ok, detail, measured, thresholds):
        raise EarlyVerdict(Verdict.REJECTED, f"Rejected: the measured time is physically impossible ({detail}).")


def review_flags(settings: EvalSettings, candidate: RuntimeStats, reference: RuntimeStats) -> list[str]:
    """Reasons for a person to look at a result that passed: a speedup too large to take on trust."""
    if reference.median_ms / candidate.median_ms > settings.review_speedup:
        return [f"speedup above {settings.review_speedup:g}x over eager: review"]
    return []


def record_silent_guards(record: Record) -> None:
    """The checks whose guards fired nothing through the whole evaluation, recorded as passed."""
    ev = record.evidence
    for name, detail in (
        (
            CheckName.CUSTOM_KERNEL_LAUNCHED,
            f"{ev.guarded_calls} calls, kernels: {', '.join(sorted(ev.custom_kernels))}",
        ),
        (CheckName.HARNESS_INTEGRITY, "no harness callable replaced"),
        (CheckName.NUMERIC_FLAGS, "global numeric flags unchanged"),
        (CheckName.SANDBOX_VIOLATION, "no forbidden file, network or process access"),
        (CheckName.OUTPUT_STABLE_AFTER_RETURN, "outputs unchanged after the call returned"),
        (CheckName.NO_NEW_THREADS, "no threads left running"),
    ):
        record.check(name, True, detail)
