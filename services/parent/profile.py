"""Profile: where the candidate's GPU time goes, from the torch profiler in its child (GPU only)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from services.errors import EarlyVerdict
from services.parent import evidence
from services.parent.link import Link
from services.parent.record import Record
from services.protocol.messages import Profile, Profiled, ProfilerStarted, StartProfiler
from services.schema import CheckName, ProfileSummary, Verdict


@dataclass(frozen=True)
class ProfileOutcome:
    """The candidate's profile and what the feedback says of it; a candidate rejected for its coverage still
    reports its profile (the rejection's `reached`)."""

    summary: ProfileSummary | None = None
    text: str = ""


def profile(link: Link, record: Record, policy: str) -> ProfileOutcome:
    """Custom-kernel coverage over a few calls; under `policy` strict it must reach the configured share,
    otherwise it must be above zero. Like any other request it runs beside other evaluations' work, never during
    their measurements: the profiler sees only its own process's kernels, and coverage is a ratio of their
    times, which time-slicing with a neighbour stretches alike. It comes after the candidate's timing, and a
    waiting child does not start the profiler ahead of its job: a process that has run a profiler session
    launches slower from then on (6.8 to 8.7 µs a launch on an H200, bench/profiler_warmup.py), which moved the
    row sum's reference by 8% (docs/benchmarks.md)."""
    s = link.settings
    seeds = [link.seed("profile", i) for i in range(s.profile_calls)]
    deadline = time.monotonic() + s.timing_timeout_s
    # The profiler's first start in a process is driver work the host does in turn for all its GPUs (4 s in a fresh
    # child beside other GPUs' children, docs/benchmarks.md), and a timed call beside other processes' profiler
    # starts on its GPU ran as fast as alone (bench/driver_contention.py --neighbour-kind profile): it starts
    # without a turn of the slot, so measurements on the device need not wait for it.
    link.ask(link.cand, StartProfiler(), ProfilerStarted, deadline, "starting the profiler", turn=False)
    reply, _ = link.ask(link.cand, Profile(seeds=seeds), Profiled, deadline, "profiling forward()")
    for part, seconds in zip(("start", "calls", "stop"), reply.split_s, strict=True):
        link.tally(f"candidate.profile_{part}", seconds, len(seeds))
    # The profiler (CUPTI, Kineto) leaves threads of its own in the child. Timing is over and its threads were
    # checked, so later stages count new threads from here.
    record.evidence.thread_baseline = link.cand.threads()
    record.evidence.custom_kernels |= evidence.launched_names(reply.launches)
    summary = evidence.coverage(reply.kernels, record.evidence.custom_kernels, len(seeds))
    cov = summary.coverage
    if evidence.coverage_unmeasured(cov, launched := evidence.launch_count(reply.launches), policy):
        record.stand_down(
            CheckName.CUSTOM_KERNEL_COVERAGE,
            f"the profiler recorded none of the {launched} launches of your kernels that the launch recorder "
            f"counted over {len(seeds)} calls: its record is incomplete",
            {"coverage": cov, "launches": launched},
        )
        return ProfileOutcome(summary, "Custom-kernel coverage not measured: the profiler's record was incomplete.")
    need = s.strict_min_coverage if policy == "strict" else 0.0
    ok = cov >= need if need else cov > 0
    needs = f"at least {need:.0%}" if need else "more than 0"
    detail = f"custom kernels {cov:.1%} of GPU time (policy {policy} needs {needs})"
    if not record.check(
        CheckName.CUSTOM_KERNEL_COVERAGE, ok, detail, {"coverage": cov}, {"coverage": need, "policy": policy}
    ):
        raise EarlyVerdict(
            Verdict.REJECTED,
            f"Rejected: your own Triton kernels account for {cov:.1%} of the GPU time "
            f"(policy {policy} needs {needs}); "
            "the rest runs in PyTorch or library kernels.",
            reached=ProfileOutcome(summary),
        )
    top = ", ".join(f"{k.name[:40]} {k.share:.0%}{' (yours)' if k.custom else ''}" for k in summary.top_kernels[:3])
    return ProfileOutcome(summary, f"Custom-kernel coverage {cov:.1%}; top GPU kernels: {top}.")
