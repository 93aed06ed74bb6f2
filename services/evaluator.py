"""The trusted parent: drives a reference child and a candidate child through the stages and decides the verdict.

Candidate code never runs here. This process owns the nonce and the seeds, receives the children's tensors
into buffers it allocated, compares them, reduces the raw timing samples into statistics and checks them
against its own wall clock. Every failure of a child maps to a verdict; nothing a child does can make
`evaluate` hang (every wait has a deadline) or lose the result. The stages live in `services.parent`, the
child side in `services.child`, the messages between them in `services.protocol`.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import triton

from services import feedback, timing_cache
from services.device_lock import TimingSlot
from services.errors import DeviceMemoryShort, EarlyVerdict, InfrastructureFault, ReferenceFailed
from services.hidden_shapes import shape_generality
from services.parent.correctness import CorrectnessOutcome, correctness, hidden_sizes
from services.parent.defences import plausibility, record_silent_guards
from services.parent.dependence import output_dependence
from services.parent.load import acquire_references, load, start_children, start_reference, static_triage
from services.parent.precompile import PrecompileOutcome, begin_precompile, finish_precompile
from services.parent.profile import ProfileOutcome, profile
from services.parent.references import KeptReferences
from services.parent.session import SMALL_TENSOR_BYTES, Session
from services.parent.timing import TimingOutcome, TimingPlan, timing
from services.problems import Problem
from services.sandbox import TRITON_CACHE, ChildPool, drain_closed_children
from services.schema import PROTOCOL_VERSION, Environment, EvalOptions, EvalResult, Verdict
from services.settings import EvalSettings
from services.timing_cache import TimingStore


class Evaluator:
    """Evaluates candidates against references; keeps warm children between evaluations.

    `timing_slot` (made from `settings.device_lock` when set: services.device_lock) is held around every
    measurement a concurrent evaluation on the same GPU would disturb: the timing stage's calls (warm-up,
    samples, re-checks, the wall-clock confirmation calls, and the samples of the other reference processes,
    each held separately); every other request to a child holds it shared, so no other evaluation's GPU work
    runs during a measurement. The CPU-bound work of several evaluations (child start,
    imports, comparing outputs in the parent) overlaps, and only the device is taken in turns.
    """

    def __init__(self, settings: EvalSettings | None = None, pool: ChildPool | None = None):
        self.settings = settings or EvalSettings()
        self.pool = pool or ChildPool(self.settings)
        lock = self.settings.device_lock
        self.timing_slot = TimingSlot(Path(lock), self.settings.device_lock_gather_s) if lock else None
        self._mem_pools: dict[str, Any] = {}
        self.references = KeptReferences(self.settings.reference_children_kept)
        self._current: Session | None = None
        # The last evaluation's, for the worker's log: what the compiler child did, and the requests to the
        # children by child and command (Session.requests).
        self.last_precompile: PrecompileOutcome | None = None
        self.last_requests: dict[str, dict[str, float]] = {}
        self.last_retried_alone = False  # it ran out of memory beside others and ran again alone
        self.last_started_alone = False  # its problem had, so it started alone
        self.last_reference_kept = False  # its reference child had served an earlier evaluation
        self._alone = ProblemsAlone(Path(f"{lock}.alone")) if lock else None

    def evaluate(
        self,
        problem: Problem,
        candidate_source: str,
        options: EvalOptions | None = None,
        timings: TimingStore | None = None,
    ) -> EvalResult:
        """`timings` keeps reference timings between evaluations (see `services.timing_cache`). An evaluation
        that ran out of device memory beside others' runs once more with the device to itself; where the
        problem's sizes were the cause, that problem's next candidates on the device start alone."""
        options = options or EvalOptions()
        device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device == "cuda" and not torch.cuda.is_available():
            raise InfrastructureFault("device 'cuda' requested but no CUDA device is available")
        slot = self.timing_slot if device == "cuda" else None
        self.last_retried_alone = self.last_started_alone = self.last_reference_kept = False
        if slot is None or self._alone is None:  # both made from the device lock
            return self._attempt(problem, candidate_source, options, device, timings, None)
        if problem in self._alone:
            self.last_started_alone = True
        else:
            try:
                return self._attempt(problem, candidate_source, options, device, timings, slot)
            except DeviceMemoryShort as short:
                self.last_retried_alone = True
                if short.problem_sized:
                    self._alone.add(problem)
        # Out of the handler: the first attempt's frames are gone, and with them the buffers they held.
        with slot.alone():
            self.references.close()  # this process's idle reference children hold device memory too
            drain_closed_children(every=True)  # the first attempt's, whatever they held
            torch.cuda.empty_cache()
            return self._attempt(problem, candidate_source, options, device, timings, None)

    def _attempt(
        self,
        problem: Problem,
        candidate_source: str,
        options: EvalOptions,
        device: str,
        timings: TimingStore | None,
        sharing: TimingSlot | None,
    ) -> EvalResult:
        """One run of the stages; `sharing`: the slot whose device other evaluations' memory may fill."""
        session = Session(
            self.settings, options, device, self.receive_pool, self.timing_slot, memory_shared=sharing is not None
        )
        self._current = session
        try:
            with _stay(sharing):
                return _run(session, self.pool, self.references, problem, candidate_source, timings)
        except torch.OutOfMemoryError as exc:  # this process's buffers for the children's tensors
            if sharing is not None:
                raise DeviceMemoryShort("the device ran out of memory for the parent's buffers", True) from exc
            raise ReferenceFailed(
                "the device's memory cannot hold this evaluation's tensors, with the device to itself: "
                f"{str(exc).splitlines()[0]}"
            ) from None
        finally:
            self._current = None
            self.last_reference_kept = session.reference_kept
            self.last_precompile = session.precompiled
            self.last_requests = {kind: {"n": t["n"], "s": round(t["s"], 4)} for kind, t in session.requests.items()}
            if device == "cuda":  # what the parent received goes back to the device, not to an idle cache
                self._mem_pools = {}
                torch.cuda.empty_cache()

    def cancel(self) -> bool:
        """Stop the evaluation in flight, from another thread: its children are killed, so `evaluate` raises
        EvaluationCancelled promptly."""
        session = self._current
        if session is None:
            return False
        session.cancelled = True
        for child in session.children():
            child.kill()
        return True

    def receive_pool(self, kind: str) -> Any:
        """A private CUDA memory pool for buffers children write into, so the segments a child can map never hold
        anything else of the parent's: per `kind`, "reference" and "candidate" for small buffers, whose segments a
        child keeps mapped (services.protocol.tensors.open_cuda) and which must therefore never hold the other
        role's tensors (a candidate's mapping would reach the reference's outputs), and "large" for the rest, which
        no child keeps mapped and which both roles share, so that a freed output's gigabytes serve the next."""
        if kind not in self._mem_pools and hasattr(torch.cuda, "MemPool"):
            self._mem_pools[kind] = torch.cuda.MemPool()
        return self._mem_pools.get(kind)

    def close(self) -> None:
        self.references.close()
        self.pool.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProblemsAlone:
    """The problems whose own sizes ran a shared device out of memory (a KernelBench problem at its published
    sizes: three in flight exhausted an H200), as empty files named after the reference source's hash in
    `directory`, beside the device's lock files: every process that evaluates on the device reads and adds to
    them. Their next candidates start alone rather than each failing once beside others first (on an H200, 6 of 8
    such evaluations did, and waited 44 s in all to run again). The `most` latest are kept."""

    def __init__(self, directory: Path, most: int = 256):
        self.directory = directory
        self.most = most

    def _file(self, problem: Problem) -> Path:
        return self.directory / problem.digest

    def add(self, problem: Problem) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file(problem).touch()  # the latest again where it was there already
        kept = sorted(self.directory.iterdir(), key=_mtime)
        for old in kept[: max(0, len(kept) - self.most)]:
            old.unlink(missing_ok=True)

    def __contains__(self, problem: Problem) -> bool:
        return self._file(problem).exists()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # another process pruned it meanwhile
        return 0.0


@contextmanager
def _stay(sharing: TimingSlot | None) -> Iterator[None]:
    """An evaluation's stay on a shared device, until the children that held its memory are gone: an evaluation
    alone on the device next must not meet their memory."""
    if sharing is None:
        yield
        return
    with sharing.occupy():
        try:
            yield
        finally:
            drain_closed_children(every=False)


def _run(
    session: Session,
    pool: ChildPool,
    references: KeptReferences,
    problem: Problem,
    candidate: str,
    timings: TimingStore | None,
) -> EvalResult:
    """The stages in order; the first EarlyVerdict ends the evaluation with what the stages reached."""
    s, opt, gpu = session.settings, session.options, session.device == "cuda"
    phases: dict[str, float] = {}
    checked, timed, profiled = CorrectnessOutcome(), TimingOutcome(), ProfileOutcome()
    flags: list[str] = []
    stored = timing_cache.Lookup(timings, problem.source, environment(session.device, "unknown"), s, session.nonce)
    verdict, texts = Verdict.PASSED, []
    ended = False
    t0 = time.monotonic()
    try:
        if session.defended:
            static_triage(session, candidate)
        with _phase(phases, "start"):
            session.reference_kept = start_children(session, pool, references, problem, candidate)
            pending = None
            if gpu and s.precompile:
                capability = torch.cuda.get_device_capability()
                pending = begin_precompile(session, pool, problem, candidate, (capability[0], capability[1]))
        phases["start_ready_wait"] = session.ref.waited_ready_s + session.cand.waited_ready_s
        phases["start_drain"] = session.ref.waited_drain_s + session.cand.waited_drain_s
        with _phase(phases, "load"):
            load(session)
        if pending is not None:
            with _phase(phases, "precompile"):  # the wait for the pass after the load
                cache = os.path.join(session.cand.tmpdir, TRITON_CACHE)
                session.precompiled = finish_precompile(session, pending, cache)
        with _phase(phases, "correctness"):
            correctness(session, opt.correctness_trials or s.correctness_trials, candidate, checked)
            if why := shape_generality(problem.source, opt.policy or s.policy):
                hidden_sizes(session, problem.source, why, checked)
        texts.append(checked.text)
        if opt.timing:
            with _phase(phases, "timing"):
                timing(session, _timing_plan(session, pool, problem, stored), timed)
            phases.update({f"timing_{part}": held for part, held in timed.held_s.items()})
            texts.append(timed.text)
        cand, ref = timed.runtimes.get("candidate"), timed.runtimes.get("reference")
        if session.defended and gpu and opt.profile:
            with _phase(phases, "profile"):
                profile(session, opt.policy or s.policy, profiled)
            texts.append(profiled.text)
        if session.defended and gpu and cand and ref:
            flags += plausibility(session, cand, ref, checked.io_bytes, checked.flops)
        if session.defended:
            with _phase(phases, "dependence"):  # last: whatever a neutralised call leaves behind reaches nothing
                output_dependence(session)
            record_silent_guards(session)
        stored.save(timed.runtimes, timed.from_cache)  # only an evaluation that passed every check stores
        ended = True
    except EarlyVerdict as early:
        verdict, texts = early.verdict, [early.feedback]
        ended = True
    finally:
        stored.release()
        io = sum(checked.io_bytes)
        # Not after a failure of the machine's, the reference's, or a cancellation (`ended` unset), and only where
        # its tensors were small: an idle child keeps what its caching allocator holds.
        if ended and io <= SMALL_TENSOR_BYTES and (child := session.keep_reference()):
            references.keep(references.key(session.device, problem), child)
        # A dying CUDA child holds its memory for ~0.1 s, which the next start waited through (`start_drain`,
        # 0.10-0.15 s on an H200): only where its tensors were large, or no run alone would catch a shortage.
        network = session.close(light=session.memory_shared and 0 < io <= SMALL_TENSOR_BYTES)
        if checked.compiled:  # Triton compile and autotune time, as the candidate child's hooks measured it
            phases["compile"] = session.compile_total_s
            phases["first_call"] = checked.first_call_s
            if "correctness" in phases:
                phases["correctness"] -= min(session.compile_total_s, phases["correctness"])
        phases["total"] = time.monotonic() - t0
    return _result(session, problem, verdict, " ".join(texts), network, checked, timed, profiled, flags, phases)


@contextmanager
def _phase(phases: dict[str, float], name: str) -> Iterator[None]:
    """Seconds spent in a stage, recorded only when it completes (as the phases have always been)."""
    t = time.monotonic()
    yield
    phases[name] = time.monotonic() - t


def _timing_plan(session: Session, pool: ChildPool, problem: Problem, stored: timing_cache.Lookup) -> TimingPlan:
    s, cpu = session.settings, session.device == "cpu"
    sides: dict[str, tuple[str, Any]] = {"reference": ("reference", "eager"), "candidate": ("candidate", "eager")}
    if session.options.compare_compile and not cpu:
        sides["compiled"] = ("reference", "compiled")
    return TimingPlan(
        sides,
        stored=stored.load({k: v for k, (_, v) in sides.items() if k != "candidate"}, session.stop_if_cancelled),
        cap_s=s.cpu_timing_budget_s if cpu else (session.options.timing_budget_s or s.timing_budget_s),
        # Several processes only pay off where the figure is kept for the next candidates (a timing store).
        processes=s.cpu_reference_processes if cpu else (s.reference_processes if stored.store is not None else 1),
        acquire_references=lambda n: acquire_references(session, pool, n),
        start_reference=lambda child: start_reference(session, child, problem),
    )


def _result(
    session: Session,
    problem: Problem,
    verdict: Verdict,
    text: str,
    network: str,
    checked: CorrectnessOutcome,
    timed: TimingOutcome,
    profiled: ProfileOutcome,
    flags: list[str],
    phases: dict[str, float],
) -> EvalResult:
    cand = timed.runtimes.get("candidate")
    ref = timed.runtimes.get("reference")
    comp = timed.runtimes.get("compiled")
    meaningful = session.device == "cuda" and cand is not None
    passed = verdict is Verdict.PASSED
    if stood := sorted({c.name for c in session.checks if c.stood_down}):
        text += f" Checks stood down, as the problem's own reference would fail them: {', '.join(stood)}."
    return EvalResult(
        problem=problem.id,
        verdict=verdict,
        compiled=checked.compiled,
        correct=passed,
        speedup=ref.median_ms / cand.median_ms if passed and meaningful else None,
        speedup_vs_compile=comp.median_ms / cand.median_ms if passed and meaningful and comp else None,
        timing_meaningful=meaningful,
        candidate_runtime=cand,
        reference_runtime=ref,
        reference_compile_runtime=comp,
        correctness=checked.summary,
        checks=session.checks,
        profile=profiled.summary,
        flags=flags,
        timings_from_cache=timed.from_cache,
        feedback=feedback.cap(f"[{verdict.value}] {text}".strip(), session.settings.feedback_max_chars),
        phases={k: round(v, 4) for k, v in phases.items()},
        environment=environment(session.device, network),
    )


def environment(device: str, network: str) -> Environment:
    gpu = driver = None
    if device == "cuda":
        gpu = torch.cuda.get_device_name(0)
        try:
            with open("/proc/driver/nvidia/version") as f:
                driver = f.readline().split("Kernel Module")[-1].split()[0]
        except (OSError, IndexError):
            driver = None
    return Environment(
        device=device,
        gpu_name=gpu,
        driver=driver,
        cuda=torch.version.cuda,
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        protocol_version=PROTOCOL_VERSION,
        network_isolation=network,
    )
