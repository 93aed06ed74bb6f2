"""Timing: reference and candidate calls on unseen inputs, alternating in blocks, reduced in the parent.

Each call is timed by CUDA events in its child and checked against the parent's own wall clock around the
request; the per-call time outside the events (and how much longer a device-wide sync waits than the stream
sync) is kept for the wall-clock defences. Sampling is adaptive: it stops once the 95% CI of every timed
side's median is within `target_ci_rel` (or `target_ci_ticks` ticks of the timer, where wider) and each side has
made its least calls (`min_timed_calls`, fewer for slow calls: `min_timed_ms`), or at a cap (calls or wall time),
and each side reports the width it reached and the target it had. A reference side is timed in several processes
(from `reference_min_processes` up to `reference_processes`, by the precision of their mean; each within its share
of the reference's budget, `reference_budget_s`) and reported as the mean of their medians, because one process's
median is not the reference's time; a stored reference timing is
reused unless a few fresh calls put its median outside the range of its per-process medians with 95% confidence,
and timed again when they do; the new figure replaces it only where the further processes confirm the drift.
The candidate is timed in its one process. Where the inputs are large, every side's calls are instead spread over
several placements of its inputs in device memory (`timing_placements`), in the evaluation's own children, and
its time is the fastest placement's median: a memory-bound kernel's time depends on the pages its inputs lie on, a
placement can only slow it, and at such sizes a reference's time varies no more between processes than between
placements in one. A slow placement's calls (`stats.bearing_placements`) count towards neither the time nor its
precision, and a side whose current placement is slow takes another, up to `SPARE_PLACEMENTS` more. A new
reference timed so, whose figure a timing store keeps, is held to its whole budget once every placement has its
share.

Each call's window opens behind a GPU spin (the launch shield) so the host's launches are queued before it:
the child reports whether forward() returned while the spin still ran, and a call that outlasted it doubles the
spin for every side's later calls (up to a cap). Without that, host time leaks into some calls of a
microsecond-scale kernel and its median never settles.

The candidate's outputs are re-checked against the reference's on a random tenth of its timed calls (a larger
share where slow calls let fewer than `min_timed_calls` suffice), chosen after each call returned, and on the last:
from copies the child makes before the next call, compared once the slot is released
(services.parent.defences.recheck), so the measurement holds the device for the timed calls alone.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from services import feedback, stats
from services.parent import defences
from services.parent.link import Link
from services.parent.record import Record
from services.protocol import tensors
from services.protocol.messages import Structure, Time, Timed, Variant
from services.sandbox import Child
from services.schema import CheckName, RuntimeStats, Verdict
from services.settings import EvalSettings

# Placements a side may take beyond `timing_placements`, each only when the one it leaves was slow.
SPARE_PLACEMENTS = 2


@dataclass(frozen=True)
class TimingPlan:
    """Which sides to time (side -> which child, which variant), their stored statistics, the wall cap of one
    sampling loop, how many processes a reference side is timed in and whether a new one is held to its budget,
    how to take more reference children and start
    them (side by side), and the structure of the reference's output in the correctness trials (re-checks receive the
    candidate's outputs into buffers of that structure)."""

    sides: dict[str, tuple[str, Variant]]
    stored: dict[str, RuntimeStats]
    cap_s: float
    processes: int
    budgeted: bool  # a new reference's calls held to its budget: a timing store keeps its figure
    placements: int  # of each side's inputs, in the evaluation's own children
    acquire_references: Callable[[int], list[Child]]
    start_references: Callable[[list[Child]], list[Child]]
    reference_output: Structure | None


@dataclass(frozen=True)
class FurtherProcesses:
    """A new reference's timing still to finish in more processes (`time_further_processes`): the evaluation's own
    timer (its samples), the children taken for them, and the sides they time."""

    first: _Timer
    spare: list[Child]
    sides: list[str]


@dataclass(frozen=True)
class TimingOutcome:
    """Each side's statistics, and what the feedback says of them (empty: nothing was timed). With `further`,
    the reference's statistics are its first process's alone until `time_further_processes` has run."""

    runtimes: dict[str, RuntimeStats] = field(default_factory=dict)
    from_cache: list[str] = field(default_factory=list)  # sides whose statistics came from stored timings
    # Seconds by part. Most are the evaluation's own hold of the device's slot: every other evaluation on the GPU
    # waits through it, so each is a cost of the whole GPU's throughput, not of this evaluation alone. Three are not
    # held: `rechecks` (the re-checked calls' copies and the distinct-outputs check, after the slot),
    # `reference_release` (giving back what the further processes do not need) and `reference_starts` (giving
    # the next reference processes their job, loading them and waiting for the slot between them; `reference_waits`
    # is the part of it spent waiting for other evaluations' measurements on the device).
    parts_s: dict[str, float] = field(default_factory=dict)
    text: str = ""
    further: FurtherProcesses | None = None
    # Sides timed over placements: (side, first call's start, last call's end, median ms) per placement.
    placement_windows: list[tuple[str, float, float, float]] = field(default_factory=list)
    # The evaluation's own reference process found a stored timing drifted and the further processes did not
    # confirm it: an offset of that process's own, which would fail every later revalidation, so it is not kept.
    own_offset: bool = False


class _Timer:
    """Times calls of one or more sides, each on its child, and applies the per-call checks (clock sanity,
    guards, launches, re-checks). `samples`, `overheads` and `extras` keep every kept call, per side."""

    def __init__(
        self,
        link: Link,
        record: Record,
        children: dict[str, tuple[Child, Variant]],
        deadline: float,
        purpose: str,
        ref_struct: Structure | None,
        placements: int = 1,
    ):
        self.link = link
        self.record = record
        self.children = children
        self.deadline = deadline
        self.purpose = purpose
        self.ref_struct = ref_struct  # the reference's output in the correctness trials, for the re-checks
        self.samples: dict[str, list[float]] = {side: [] for side in children}
        self.overheads: dict[str, list[float]] = {side: [] for side in children}
        self.extras: dict[str, list[float]] = {side: [] for side in children}
        self.spent_s: dict[str, float] = {side: 0.0 for side in children}  # every call's wall time, warm-up included
        self.uncovered: dict[str, int] = {side: 0 for side in children}  # kept calls with host time in them
        # Each side's kept calls per placement of its inputs; a side in `moving` moves them on its next call.
        self.placements = placements
        self.per_placement: dict[str, list[int]] = {side: [0] for side in children}
        self.moving: set[str] = set()
        # Each side's placements by when their kept calls ran (monotonic seconds, the timing slot's clock): for a
        # bench to set a slow placement beside what else the host did then (`TimingOutcome.placement_windows`).
        self.windows: dict[str, dict[int, list[float]]] = {side: {} for side in children}
        # One spin for every side, grown whenever a call's launches outlast it: it moves only where the host's
        # time would otherwise leak into the window, never the GPU time it shields.
        self.shield = 0 if link.device == "cpu" else link.settings.launch_shield_cycles
        self.count = 0
        self.last_candidate: defences.TimedCall | None = None
        # Candidate calls chosen for a re-check: the one whose output the next call copies aside in the child,
        # those copied (compared after the measurement) and the device memory the copies hold.
        self.chosen: defences.TimedCall | None = None
        self.recheck_share = link.settings.recheck_fraction  # of kept candidate calls; set by warm_up
        self.retained: list[defences.TimedCall] = []
        self.retained_bytes = 0

    def __call__(self, side: str, keep: bool) -> tuple[float, float]:
        s, record = self.link, self.record
        child, variant = self.children[side]
        self.count += 1
        seed = s.seed(self.purpose, self.count)
        retain = side == "candidate" and self.chosen is not None
        moved = side in self.moving
        began = time.monotonic()
        sent = time.perf_counter()
        command = Time(
            seed=seed, variant=variant, shield_cycles=self.shield, retain_previous=retain, new_placement=moved
        )
        h, _ = s.ask(child, command, Timed, self.deadline, f"timing ({side})")
        role = "candidate" if child is s.cand else "reference"
        for part, seconds in zip(("placement", "inputs", "call", "digest"), h.split_s, strict=True):
            s.tally(f"{role}.time_{part}", seconds)
        if retain:
            self.retained.append(replace(self.chosen, retained=len(self.retained)))
            self.chosen = None
        if moved:
            self.moving.discard(side)
            self.per_placement[side].append(0)
        wall_ms = (time.perf_counter() - sent) * 1e3
        self.spent_s[side] += wall_ms / 1e3
        if not h.covered and self.shield:
            self.uncovered[side] += keep
            self.shield = max(self.shield, min(2 * self.shield, s.settings.launch_shield_max_cycles))
        if self.purpose == "time" and side == "candidate":  # the evaluation's own child: the replay check
            record.record_digest(seed, h.digest)
        if not (0 < h.ms <= wall_ms * 1.01 + 0.05) or not math.isfinite(h.ms):
            raise record.fail(
                CheckName.TIMING_WALL_CLOCK,
                f"{side} reported {h.ms:.4g} ms inside {wall_ms:.4g} ms",
                Verdict.REJECTED,
                "Rejected: a reported time is impossible against the harness's own clock.",
                measured={"reported_ms": h.ms, "wall_ms": wall_ms},
                thresholds={"reported_ms": wall_ms * 1.01 + 0.05},
            )
        if side == "candidate":
            record.guard_process(s.cand, "a timed call", processes=False)
            record.require_launches(h.launches, "a timed call")
            self.last_candidate = defences.TimedCall(seed, h.structure, h.digest)
            if keep and s.defended and s.rng.random() < self.recheck_share:
                self._choose(self.last_candidate)
        if keep:
            self.samples[side].append(h.ms)
            self.per_placement[side][-1] += 1
            self.windows[side].setdefault(len(self.per_placement[side]) - 1, [began, 0.0])[1] = time.monotonic()
            self.overheads[side].append(wall_ms - h.ms)
            self.extras[side].append(h.sync_extra_ms)
        return wall_ms - h.ms, h.sync_extra_ms

    def _choose(self, call: defences.TimedCall) -> None:
        """Re-check this call: after the measurement, from a copy the child makes before the next call, while
        the copies fit their memory budget; else now, inside the measurement."""
        size = tensors.nbytes(call.structure)
        if self.retained_bytes + size <= self.link.settings.recheck_retain_mb * 2**20:
            self.retained_bytes += size
            self.chosen = call
        else:
            defences.recheck(self.link, self.record, call, self.ref_struct, self.deadline)

    def recheck_all(self) -> None:
        """The chosen calls and the last one, compared with the reference's outputs (once the slot is released,
        as other evaluations' GPU work may run beside it). A chosen call that no later call followed is the last."""
        calls = [*self.retained, self.last_candidate]
        defences.recheck_all(self.link, self.record, calls, self.ref_struct, self.deadline)
        # The candidate's copies; the reference keeps nothing from a Recompute, and the next Call drops what a
        # re-check's Call kept.
        if self.retained:
            self.link.release(self.deadline, self.link.cand)

    def warm_up(self, cap_s: float) -> tuple[int, int]:
        """Calls by time on every side (`warmup_ms`; two calls on CPU) before any sample counts; returns the block
        length, about 25 ms of the slowest side's calls, the same for every side so that drift between blocks
        cancels, and the least calls a side then makes (`stats.min_calls` of the slowest side's calls); fewer than
        `min_timed_calls` re-check a larger share of the candidate's calls."""
        s = self.link.settings
        cpu = self.link.device == "cpu"
        warm_ms = 0.0 if cpu else s.warmup_ms
        t = time.monotonic()
        slowest = 0.0
        for side in self.children:
            spent, calls = 0.0, 0
            while calls < 2 or spent < warm_ms:
                before = time.perf_counter()
                self(side, keep=False)
                spent += (time.perf_counter() - before) * 1e3
                calls += 1
                if time.monotonic() - t > cap_s:
                    break
            slowest = max(slowest, spent / calls)
        least = 3
        if not cpu:
            least = stats.min_calls(slowest, s.min_timed_calls, s.min_timed_ms)
            # As many re-checks as a measurement of `min_timed_calls` calls expects, however few this one needs.
            self.recheck_share = min(1.0, s.recheck_fraction * s.min_timed_calls / least)
        return max(2, min(50, int(25.0 / max(slowest, 1e-3)))), least

    def sample(
        self,
        sides: list[str],
        block: int,
        min_calls: int,
        cap_s: float,
        budgeted: tuple[str, ...] = (),
        processes: int = 1,
    ) -> None:
        """Blocks of calls, side after side, until every side's median is precise enough and its calls have
        visited every placement of its inputs (each its share of `min_calls`), or at a cap. A side in `budgeted` is
        a new reference whose figure a timing store keeps, timed in `processes` processes (whose medians' mean is
        its figure) or over this process's placements: once it has made `min_calls`, visited every placement and
        would pass this process's share of its budget (`reference_share_s`) with one more block as long as its last,
        it holds the others back no longer and takes no more calls."""
        s = self.link.settings
        share = math.ceil(min_calls / self.placements)
        t = time.monotonic()
        rotation = list(sides)
        last_block_s = dict.fromkeys(sides, 0.0)
        while True:
            for side in rotation:
                if self._moves_on(side, share):
                    self.moving.add(side)
                before = self.spent_s[side]
                for _ in range(block):
                    self(side, keep=True)
                last_block_s[side] = self.spent_s[side] - before
            spent = {
                side
                for side in budgeted
                if self.spent_s[side] + last_block_s[side] > reference_share_s(s, self.samples[side], processes)
                and len(self.samples[side]) >= min_calls
                and self._visited(side, share)
            }
            rotation = [side for side in rotation if side not in spent]
            if not rotation:
                return
            n = min(len(self.samples[side]) for side in rotation)
            precise = all(
                side in spent
                or stats.precise_enough(self._within(side), s.timer_resolution_ms, s.target_ci_rel, s.target_ci_ticks)
                for side in sides
            )
            visited = all(self._visited(side, share) for side in sides)
            if (n >= min_calls and visited and (precise or time.monotonic() - t > cap_s)) or n >= s.max_timed_calls:
                return

    def _visited(self, side: str, share: int) -> bool:
        """Whether the side's calls have visited every placement, the current one with its share of calls."""
        return len(self.per_placement[side]) >= self.placements and self.per_placement[side][-1] >= share

    def _moves_on(self, side: str, share: int) -> bool:
        """Whether the side's next call takes a new placement: once its current one has its share of calls, while
        it has visited fewer than `placements`, or, up to SPARE_PLACEMENTS more, while the current one is slow
        (`stats.is_slow_placement`): its calls do not bear on the time, so more of them there would buy nothing."""
        counts = self.per_placement[side]
        if counts[-1] < share:
            return False
        if len(counts) < self.placements:
            return True
        groups = self.groups(side)
        return len(counts) < self.placements + SPARE_PLACEMENTS and stats.is_slow_placement(groups, len(groups) - 1)

    def _within(self, side: str) -> list[float]:
        """The side's samples from the placements that bear on its time (`stats.bearing_placements`), each
        placement's scaled to the mean of their medians: their precision is the calls' own, without the spread
        between placements, which more calls in one placement cannot narrow."""
        groups = stats.bearing_placements(self.groups(side))
        if len(groups) == 1:
            return groups[0]
        return stats.scaled_placements(groups, statistics.fmean(statistics.median(g) for g in groups))

    def groups(self, side: str) -> list[list[float]]:
        """The side's kept samples, one list per placement of its inputs."""
        found, start = [], 0
        for n in self.per_placement[side]:
            found.append(self.samples[side][start : start + n])
            start += n
        return [g for g in found if g]


def timing(link: Link, record: Record, plan: TimingPlan) -> TimingOutcome:
    """Time the sides in the evaluation's own children, then run the timing defences. Holds the link's timing slot
    while calls are timed. A new reference's further processes are taken from the pool here, so that they start
    while this evaluation times, and are timed later (`time_further_processes`)."""
    s = link.settings
    cpu = link.device == "cpu"
    children = {
        side: (link.ref if role == "reference" else link.cand, variant) for side, (role, variant) in plan.sides.items()
    }
    # Nothing stored: the reference will be timed in more processes, at least `reference_min_processes`. Their
    # children start now, side by side, while this evaluation waits for and holds the slot.
    least = min(s.reference_min_processes, plan.processes) - 1
    spare = plan.acquire_references(least) if not plan.stored else []
    with link.slot():
        # The deadline starts once the slot is held: waiting for other evaluations is not the candidate's time.
        deadline = time.monotonic() + s.timing_timeout_s
        parts_s: dict[str, float] = {}
        lap = _laps(parts_s)
        timer = _Timer(link, record, children, deadline, "time", plan.reference_output, plan.placements)
        block, min_calls = timer.warm_up(plan.cap_s)
        lap("warm_up")
        accepted = _revalidate(timer, plan.stored) if plan.stored else {}
        lap("revalidation")
        measured = [side for side in plan.sides if side not in accepted]
        budgeted = tuple(side for side in measured if side != "candidate") if plan.budgeted else ()
        timer.sample(measured, block, min_calls, plan.cap_s, budgeted, plan.processes)
        lap("sampling")
        calls = defences.OffWindow(timer.overheads, timer.extras)
        if defences.off_window_suspect(link, calls, stats.summarize(timer.samples["candidate"]), cpu):
            # Confirm on fresh calls, reference and candidate alternating, before rejecting: a neighbour's
            # burst of host or GPU work can shift one side's overheads for a while, hidden work shifts every call.
            calls = defences.OffWindow({"reference": [], "candidate": []}, {"reference": [], "candidate": []})
            for _ in range(s.confirm_calls):
                for side in calls.overheads:
                    over, extra = timer(side, keep=False)
                    calls.overheads[side].append(over)
                    calls.extras[side].append(extra)
        lap("checks")
    if link.defended:
        timer.recheck_all()
        defences.distinct_outputs(link, record, plan.reference_output, timer.deadline)
        lap("rechecks")
    record.guard_process(link.cand, "the timed calls")
    defences.wall_clock_checks(link, record, calls, stats.summarize(timer.samples["candidate"]), cpu)
    remeasured = [side for side in plan.sides if side != "candidate" and side not in accepted]
    if remeasured and not spare:  # a stored timing that did not revalidate
        spare = plan.acquire_references(least)
    further = FurtherProcesses(timer, spare, remeasured) if remeasured and plan.processes > 1 else None
    return _outcome(link, plan, [timer], accepted, parts_s, further)


def time_further_processes(
    link: Link, record: Record, plan: TimingPlan, timed: TimingOutcome, release: Callable[[int], int]
) -> TimingOutcome:
    """Finish a new reference's timing in the more processes `timed.further` names (set: `timing` left them). The
    evaluator runs this after the candidate's last stage, so that a candidate rejected there costs none of it;
    `release(n)` first frees the evaluation's own children's device memory (and, on a shared device, the share of
    it that the further processes alone need) and says how many of the `n` children taken may load side by side."""
    further = timed.further
    assert further is not None  # the caller times further processes only where `timing` left some
    began = time.monotonic()
    together = release(len(further.spare))
    released = time.monotonic()
    others, held, waited = _other_processes(link, record, plan, further.first, further.spare, further.sides, together)
    parts = timed.parts_s | {
        "reference_release": released - began,
        "reference_processes": held,
        "reference_starts": time.monotonic() - released - held,
        "reference_waits": waited,
    }
    accepted = {side: timed.runtimes[side] for side in timed.from_cache}
    medians = {side: [statistics.median(t.samples[side]) for t in others if t.samples[side]] for side in further.sides}
    kept = unconfirmed_drifts(plan.stored, medians, link.settings.reference_cache_tolerance)
    outcome = _outcome(link, plan, [further.first, *others], accepted | kept, parts, None, measured=further.sides)
    return replace(outcome, own_offset=bool(kept))


def unconfirmed_drifts(
    stored: dict[str, RuntimeStats], medians: dict[str, list[float]], tolerance: float
) -> dict[str, RuntimeStats]:
    """The stored timings, of those the evaluation's own process found drifted, that the further processes' medians
    (`medians`, by side) do not confirm: their mean lies in the stored range (`_agreeing`). That process is left out
    of the judgment: it was chosen for disagreeing, and one process's offset is no drift (on an H200, in 80
    evaluations of a 6 us row sum, the two processes that found a drift put the reference 9-10% under the mean of
    the 18 other processes timed, which all lay within 5% of it, and each new figure moved every later speedup, by
    up to 4%). Such a timing stands, and nothing replaces it in the store."""
    kept = {}
    for side, found in medians.items():
        if side in stored and found:
            low, high = _agreeing(stored[side], tolerance)
            if low <= statistics.fmean(found) <= high:
                kept[side] = stored[side]
    return kept


def _outcome(
    link: Link,
    plan: TimingPlan,
    timers: list[_Timer],
    accepted: dict[str, RuntimeStats],
    parts_s: dict[str, float],
    further: FurtherProcesses | None,
    measured: list[str] | None = None,
) -> TimingOutcome:
    """Each side's statistics over `timers` (or stored and `accepted`), with the feedback's words for them.
    `measured`: the reference sides timed in full, whose calls count in `reference_calls` (default: those not
    accepted; a stored timing that stands after all was timed in full too)."""
    s, cpu = link.settings, link.device == "cpu"
    target = None if cpu else s.target_ci_rel
    runtimes = {side: accepted.get(side) or _pooled(side, timers, s, target) for side in plan.sides}
    if measured is None:
        measured = [side for side in plan.sides if side != "candidate" and side not in accepted]
    if measured:  # the device time the reference's own calls took, in every process
        parts_s = parts_s | {"reference_calls": sum(t.spent_s.get(side, 0.0) for t in timers for side in measured)}
    windows = [
        (side, *window, statistics.median(group))
        for t in timers
        if t.placements > 1
        for side in t.windows
        for window, group in zip(t.windows[side].values(), t.groups(side), strict=True)
    ]
    if cpu:
        text = "Timing is not meaningful on CPU (Triton interpreter); no speedup is reported."
    else:
        cand, ref = runtimes["candidate"], runtimes["reference"]
        text = feedback.timing(cand, ref, ref.median_ms / cand.median_ms)
    return TimingOutcome(runtimes, sorted(accepted), parts_s, text, further, placement_windows=windows)


def reference_share_s(s: EvalSettings, samples: list[float], processes: int) -> float:
    """One process's share of a new reference's budget for its timed calls: `reference_budget_s` over the
    processes it may be timed in, `reference_budget_fast_s` where its calls' median is under 1 ms."""
    fast = bool(samples) and statistics.median(samples) < 1.0
    return (s.reference_budget_fast_s if fast else s.reference_budget_s) / processes


def _laps(into: dict[str, float]) -> Callable[[str], None]:
    """`lap(name)` adds to `into[name]` the seconds since the previous lap (the first: since `_laps`)."""
    last = time.monotonic()

    def lap(name: str) -> None:
        nonlocal last
        now = time.monotonic()
        into[name] = into.get(name, 0.0) + now - last
        last = now

    return lap


def _pooled(side: str, timers: list[_Timer], s: EvalSettings, target: float | None) -> RuntimeStats:
    """One side's statistics over the timers (processes) that timed it, or over its one timer's placements."""
    timers = [t for t in timers if side in t.samples]
    placed = len(timers) == 1 and timers[0].placements > 1
    reduce = stats.fastest_placement if placed else stats.pool
    runtime = reduce([g for t in timers for g in t.groups(side)], s.timer_resolution_ms, target)
    if target is not None:
        target = stats.stop_target(runtime.median_ms, target, s.timer_resolution_ms, s.target_ci_ticks)
    return runtime.model_copy(
        update={
            "ci95_target_rel": target,
            "launch_shield_cycles": max(t.shield for t in timers),
            "uncovered_calls": sum(t.uncovered[side] for t in timers),
        }
    )


def _revalidate(timer: _Timer, stored: dict[str, RuntimeStats]) -> dict[str, RuntimeStats]:
    """Fresh calls of each stored side, alternating with the candidate's; a stored timing is kept unless their
    median is, with 95% confidence, outside the range of its per-process medians widened by the tolerance. A
    reference whose per-process state is bimodal then revalidates in either state, twenty noisy calls do not send it
    to be timed again by chance (on an H100, 2 of 21 evaluations of a 6 us row sum did when the median itself had
    to fall in the range), and a real drift is timed again. The calls stop early once every stored side's interval
    lies inside its range (from `reference_cache_min_calls` calls, when the interval is still the calls' whole
    range): more calls would hardly put it wholly outside, and at KernelBench's published sizes the twenty calls
    were 82% of the measurement's hold (an H200). The candidate's calls count as its samples either
    way."""
    s = timer.link.settings
    ranges = {side: _agreeing(cached, s.reference_cache_tolerance) for side, cached in stored.items()}
    intervals: dict[str, tuple[float, float]] = {}
    for n in range(1, s.reference_cache_calls + 1):
        for side in timer.children:
            timer(side, keep=True)
        intervals = {side: stats.median_ci(timer.samples[side]) for side in stored}
        if n >= s.reference_cache_min_calls and all(
            ranges[side][0] <= low and high <= ranges[side][1] for side, (low, high) in intervals.items()
        ):
            break
    return {
        side: cached
        for side, cached in stored.items()
        if intervals[side][0] <= ranges[side][1] and intervals[side][1] >= ranges[side][0]
    }


def _agreeing(cached: RuntimeStats, tolerance: float) -> tuple[float, float]:
    """The range a stored timing's fresh median may fall in: its per-process medians' widened by the tolerance
    (empty where a median is not positive)."""
    medians = cached.process_medians_ms or [cached.median_ms]
    if min(medians) <= 0:
        return math.inf, -math.inf
    return min(medians) * (1 - tolerance), max(medians) * (1 + tolerance)


def _other_processes(
    link: Link,
    record: Record,
    plan: TimingPlan,
    first: _Timer,
    children: list[Child],
    sides: list[str],
    together: int,
) -> tuple[list[_Timer], float, float]:
    """The reference sides timed in more reference children, from `children` and then one more at a time, up to
    `plan.processes` processes in all (`first`, the evaluation's own, among them) and from
    `reference_min_processes` on only while the mean of their medians is less precise than one median must be.
    The first `together` of `children` are given their job, loaded and called once side by side outside the timing
    slot, then warmed up and sampled one after another within one hold of it; any more, one at a time. Each times
    within its own `timing_timeout_s`. Returns their timers, how long they held the slot and how long they waited
    for other evaluations' measurements (for the slot, and for GPU work while loading), in seconds."""
    found: list[_Timer] = []
    held = waited = 0.0
    shared_waits = link.gpu_waited_s
    children, size = list(children), max(1, together)
    while not _enough_processes(link, plan, [first, *found], sides):
        batch, children = children[:size], children[size:]
        batch = batch or plan.acquire_references(1)
        try:
            batch = plan.start_references(batch)
            asked = time.monotonic()
            with link.slot():
                began = time.monotonic()
                waited += began - asked
                for child in batch:
                    if _enough_processes(link, plan, [first, *found], sides):
                        break
                    found.append(_time_process(link, record, plan, child, sides, len(found) + 1))
                held += time.monotonic() - began
        finally:
            for child in batch:
                link.retire(child)
    return found, held, waited + link.gpu_waited_s - shared_waits


def _enough_processes(link: Link, plan: TimingPlan, timers: list[_Timer], sides: list[str]) -> bool:
    """All `plan.processes`, or from `reference_min_processes` on, each side's mean of medians precise enough."""
    s = link.settings
    if len(timers) >= plan.processes:
        return True
    return len(timers) >= s.reference_min_processes and all(
        stats.pool_precise([t.samples[side] for t in timers], s.timer_resolution_ms, s.target_ci_rel, s.target_ci_ticks)
        for side in sides
    )


def _time_process(link: Link, record: Record, plan: TimingPlan, child: Child, sides: list[str], n: int) -> _Timer:
    """The reference sides warmed up and sampled in one further process (the `n`th), within `timing_timeout_s`."""
    deadline = time.monotonic() + link.settings.timing_timeout_s
    variants = {side: (child, plan.sides[side][1]) for side in sides}
    timer = _Timer(link, record, variants, deadline, f"time{n}", plan.reference_output)
    block, min_calls = timer.warm_up(plan.cap_s)
    timer.sample(sides, block, min_calls, plan.cap_s, tuple(sides), plan.processes)
    return timer
