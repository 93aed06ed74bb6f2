"""The audit side of one evaluation: every check with what it measured, and the evidence the defences gather.

The stages record here what they decided and why; the result lists the checks, so a verdict can be audited. The
link to the children (`services.parent.link`) records here what it observes on the channel: time limits and the
candidate child's guard reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.errors import EarlyVerdict
from services.parent import evidence
from services.protocol.messages import Launches, Reply
from services.sandbox import Child
from services.schema import Check, CheckName, Measure, Verdict


@dataclass
class Evidence:
    """What the defences gather across stages, judged where each stage ends."""

    thread_baseline: set[int] = field(default_factory=set)  # the candidate child's threads before its code ran
    custom_kernels: set[str] = field(default_factory=set)
    guarded_calls: int = 0
    rechecks_passed: int = 0
    # The candidate's output digest for every call on fresh inputs (correctness trials and timed calls), by the
    # seed of the call's inputs: a repeat is judged against the reference's outputs for the same seeds.
    digests: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)


class Record:
    """One evaluation's checks and evidence; `defended`: the reward-hacking defences are on."""

    def __init__(self, defended: bool):
        self.defended = defended
        self.checks: list[Check] = []
        self.evidence = Evidence()

    def check(
        self,
        name: CheckName,
        passed: bool,
        detail: str = "",
        measured: dict[str, Measure] | None = None,
        thresholds: dict[str, Measure] | None = None,
    ) -> bool:
        """Record a check with what it measured and the thresholds it held that to (for auditing a verdict)."""
        self.checks.append(
            Check(name=name, passed=passed, detail=detail, measured=measured or {}, thresholds=thresholds or {})
        )
        return passed

    def stand_down(self, name: CheckName, detail: str, measured: dict[str, Measure] | None = None) -> None:
        """Record that a check was not applied because the problem's own reference would fail it."""
        self.checks.append(Check(name=name, passed=True, stood_down=True, detail=detail, measured=measured or {}))

    def fail(
        self,
        name: CheckName,
        detail: str,
        verdict: Verdict,
        text: str,
        measured: dict[str, Measure] | None = None,
        thresholds: dict[str, Measure] | None = None,
    ) -> EarlyVerdict:
        """Record a failed check and return the verdict that ends the evaluation (for `raise`)."""
        self.check(name, False, detail, measured, thresholds)
        return EarlyVerdict(verdict, text)

    # -- evidence the defences judge after every candidate call -------------------------------------------
    def judge_guards(self, reply: Reply) -> None:
        """Reject on anything the candidate child's guards saw since its last reply."""
        found = evidence.guard_violations(reply)
        for v in found:
            self.check(v.code, False, v.detail, v.measured, v.thresholds)
        if found:
            raise EarlyVerdict(Verdict.REJECTED, found[0].feedback)

    def guard_process(self, candidate: Child, what: str, processes: bool = True) -> None:
        """Threads (and, unless told not to, processes) the candidate child left behind, read from /proc."""
        if not self.defended:
            return
        new_threads = candidate.threads() - self.evidence.thread_baseline
        if new_threads:
            raise self.fail(
                CheckName.NO_NEW_THREADS,
                f"{len(new_threads)} new OS thread(s) still alive after {what}",
                Verdict.REJECTED,
                "Rejected: the candidate left new threads running after a call "
                "(work must finish inside forward(), on the caller's stream).",
                measured={"new_threads": len(new_threads)},
                thresholds={"new_threads": 0},
            )
        procs = candidate.descendants() if processes else []
        if procs:
            raise self.fail(
                CheckName.NO_CHILD_PROCESSES,
                f"{len(procs)} process(es) alive after {what}",
                Verdict.REJECTED,
                "Rejected: the candidate spawned processes.",
                measured={"processes": len(procs)},
                thresholds={"processes": 0},
            )

    def require_launches(self, launches: list[Launches], what: str) -> None:
        """Every forward call must launch at least one Triton kernel the candidate defines (B7/B8)."""
        if not self.defended:
            return
        missing = evidence.missing_launches(launches)
        self.evidence.guarded_calls += len(launches)
        self.evidence.custom_kernels |= evidence.launched_names(launches)
        if missing:
            raise self.fail(
                CheckName.CUSTOM_KERNEL_LAUNCHED,
                f"{missing} call(s) in {what} launched no @triton.jit kernel defined by the candidate",
                Verdict.REJECTED,
                "Rejected: forward() must launch your own @triton.jit kernels on every "
                f"call; {what} ran without one (computing the result in PyTorch, or "
                "launching a kernel only once, does not count).",
                measured={"calls_without_launch": missing, "calls": len(launches)},
                thresholds={"calls_without_launch": 0},
            )

    def record_digest(self, seed: int, digest: list[int] | None) -> None:
        """The candidate's output digest for a call on the fresh inputs of `seed`."""
        if digest is not None:
            self.evidence.digests.append((seed, tuple(digest)))
