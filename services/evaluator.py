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
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch
import triton

from services import device_memory, feedback, timing_cache
from services.device_lock import MEMORY_UNITS, HeldUnits, TimingSlot
from services.device_memory import Footprints, MemoryShare, footprint_bytes, further_processes_bytes
from services.errors import DeviceMemoryShort, EarlyVerdict, EvaluationError, InfrastructureFault, ReferenceFailed
from services.evaluation import Diagnostics, Evaluation
from services.hidden_shapes import shape_generality
from services.parent.correctness import CorrectnessOutcome, correctness, hidden_sizes
from services.parent.defences import record_silent_guards, review_flags, roofline
from services.parent.dependence import output_dependence
from services.parent.link import SMALL_TENSOR_BYTES, Link
from services.parent.load import (
    acquire_references,
    load,
    refuse_unparsable,
    refuse_without_model_new,
    start_children,
    start_references,
    static_triage,
)
from services.parent.precompile import begin_precompile, finish_precompile
from services.parent.profile import ProfileOutcome, profile
from services.parent.receive_arena import ReceiveArena
from services.parent.record import Record
from services.parent.references import KeptReferences
from services.parent.timing import TimingOutcome, TimingPlan, time_further_processes, timing
from services.problems import Problem
from services.sandbox import TRITON_CACHE, ChildPool, drain_closed_children, take_child_events
from services.schema import PROTOCOL_VERSION, Environment, EvalOptions, EvalResult, Verdict
from services.settings import EvalSettings
from services.timing_cache import TimingStore


class Evaluator:
    """Evaluates candidates against references; keeps warm children between evaluations.

    `timing_slot` (made from `settings.device_lock` when set: services.device_lock) is held around every
    measurement a concurrent evaluation on the same GPU would disturb: the timing stage's calls (warm-up,
    samples, re-checks, the wall-clock confirmation calls, and the samples of the other reference processes,
    each held separately); every other request to a child, and this process's comparisons of the children's
    tensors, hold it shared, so no other evaluation's GPU work runs during a measurement. The CPU-bound work of
    several evaluations (child start, imports, static checks) overlaps, and only the device is taken in turns.
    """

    def __init__(self, settings: EvalSettings | None = None, pool: ChildPool | None = None):
        self.settings = settings or EvalSettings()
        self.pool = pool or ChildPool(self.settings)
        lock = self.settings.device_lock
        self.timing_slot = TimingSlot(Path(lock), self.settings.device_lock_gather_s) if lock else None
        self._mem_pools: dict[str, Any] = {}
        self._arenas: dict[str, ReceiveArena] = {}
        self.references = KeptReferences(self.settings.reference_children_kept)
        self._current: Link | None = None
        self._footprints = Footprints(Path(f"{lock}.footprints")) if lock else None
        self._share = max(1, MEMORY_UNITS // self.settings.device_evaluations)  # before a problem's need is known

    def evaluate(
        self,
        problem: Problem,
        candidate_source: str,
        options: EvalOptions | None = None,
        timings: TimingStore | None = None,
    ) -> Evaluation:
        """The result and how the evaluation ran (an EvaluationError carries the latter as `diagnostics`).
        `timings` keeps reference timings between evaluations (see `services.timing_cache`). On a shared device the
        evaluation holds its problem's share of the device's memory (services.device_memory), and starts again
        with more where the problem's tensors need more or it ran out of memory beside others (then with the
        device to itself)."""
        options = options or EvalOptions()
        device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device == "cuda" and not torch.cuda.is_available():
            raise InfrastructureFault("device 'cuda' requested but no CUDA device is available")
        if device != "cuda" or self._footprints is None:  # the device is this process's alone
            return self._attempt(problem, candidate_source, options, device, timings, None, Diagnostics())
        slot = self.timing_slot
        assert slot is not None  # made from the device lock, as the footprints are
        known = self._footprints.get(problem)
        # `alone`: every unit, and nothing else left on the device: where the problem needs it, not where this
        # process's share is the whole device (a worker with one evaluation in flight keeps its reference children).
        units, alone, retries, earlier_s = known or self._share, known == MEMORY_UNITS, 0, 0.0
        while True:
            diagnostics = Diagnostics(memory_units=units, memory_retries=retries)
            began, waited = time.monotonic(), slot.memory_waited_s
            try:
                result, diagnostics = self._attempt(
                    problem, candidate_source, options, device, timings, MemoryShare(units, alone), diagnostics
                )
            except DeviceMemoryShort as short:  # never raised alone: each attempt holds more, or is alone
                need = short.units or MEMORY_UNITS  # the estimate, or the whole device after running out
                if short.problem_sized:
                    self._footprints.set(problem, need)
            else:
                # Outside the stages' `total`: so that the phases add up to the evaluation's whole time.
                spent = {"memory_wait": slot.memory_waited_s - waited, "earlier_attempts": earlier_s}
                phases = result.phases | {k: round(v, 4) for k, v in spent.items() if v > 0}
                return Evaluation(result.model_copy(update={"phases": phases}), diagnostics)
            # Out of the handler: the last attempt's frames are gone, and with them the buffers they held.
            units = min(MEMORY_UNITS, max(need, units + 1))
            alone, retries, earlier_s = units == MEMORY_UNITS, retries + 1, earlier_s + time.monotonic() - began

    def _attempt(
        self,
        problem: Problem,
        candidate_source: str,
        options: EvalOptions,
        device: str,
        timings: TimingStore | None,
        memory: MemoryShare | None,
        diagnostics: Diagnostics,
    ) -> Evaluation:
        """One run of the stages, holding `memory` of the shared device (None: the device is this process's). How
        it ran goes to `diagnostics`, which an EvaluationError out of it carries."""
        record = Record(self.settings.defences)
        shared = memory is not None and not memory.alone
        link = Link(
            self.settings,
            options,
            device,
            record,
            self.receive_pool,
            self.timing_slot,
            receive_arena=self.receive_arena if device == "cuda" and self.settings.keep_large_receive_buffers else None,
            memory_shared=shared,
            sized=(lambda inputs, output: self._sized(problem, memory.units, inputs, output)) if shared else None,
            give_back=self._give_back_receive_buffers,
        )
        self._current = link
        with _reported(diagnostics), ExitStack() as stay:
            try:
                result = self._run(link, record, problem, candidate_source, timings, diagnostics, stay, memory)
                ran = time.monotonic()
            except torch.OutOfMemoryError as exc:  # this process's buffers for the children's tensors
                if shared:
                    raise DeviceMemoryShort("the device ran out of memory for the parent's buffers", True) from exc
                raise ReferenceFailed(
                    "the device's memory cannot hold this evaluation's tensors, with the device to itself: "
                    f"{str(exc).splitlines()[0]}"
                ) from None
            finally:
                self._current = None
                diagnostics.requests = {kind: {"n": t["n"], "s": round(t["s"], 4)} for kind, t in link.requests.items()}
                diagnostics.child_events += take_child_events()
                link.give_back_buffers()
        # Outside `total`: this process's receive buffers given back, and the wait for the children to be gone.
        closing = {"closing": round(time.monotonic() - ran, 4)}
        return Evaluation(result.model_copy(update={"phases": result.phases | closing}), diagnostics)

    def _run(
        self,
        link: Link,
        record: Record,
        problem: Problem,
        candidate: str,
        timings: TimingStore | None,
        diagnostics: Diagnostics,
        stay: ExitStack,
        memory: MemoryShare | None,
    ) -> EvalResult:
        """The stages in order; the first EarlyVerdict ends the evaluation with what the stages reached. The
        evaluation's stay on the device (`memory`, held until `stay` closes) begins once the source has passed the
        parent's own checks: one refused there never waits for the device's memory, and that wait is `memory_wait`,
        outside the stages' `total`."""
        s, opt, gpu = link.settings, link.options, link.device == "cuda"
        phases: dict[str, float] = {}
        checked, timed, profiled = CorrectnessOutcome(), TimingOutcome(), ProfileOutcome()
        flags: list[str] = []
        stored = timing_cache.Lookup(timings, problem.source, environment(link.device, "unknown"), s, link.nonce)
        verdict, texts = Verdict.PASSED, []
        ended = False
        t0 = time.monotonic()
        try:
            tree = refuse_unparsable(candidate)
            refuse_without_model_new(candidate, tree)
            if link.defended:
                static_triage(record, candidate, tree)
            began = time.monotonic()
            held = stay.enter_context(self._stay(memory))
            t0 += time.monotonic() - began
            with _phase(phases, "start"):
                started = start_children(link, self.pool, self.references, problem, candidate)
                diagnostics.reference_kept = started.reference_kept
                pending = None
                if gpu and s.precompile:
                    capability = torch.cuda.get_device_capability()
                    pending = begin_precompile(link, self.pool, problem, candidate, (capability[0], capability[1]))
            phases["start_ready_wait"] = started.ready_wait_s
            phases["start_drain"] = started.drain_s
            with _phase(phases, "load"):
                loaded = load(link, record)
            if pending is not None:
                with _phase(phases, "precompile"):  # the wait for the pass after the load
                    cache = os.path.join(link.cand.tmpdir, TRITON_CACHE)
                    diagnostics.precompile = finish_precompile(link, pending, cache)
            with _phase(phases, "correctness"):
                checked = correctness(link, record, opt.correctness_trials or s.correctness_trials, candidate)
                why = shape_generality(problem.source, opt.policy or s.policy)
                also = hidden_sizes(link, record, problem.source, why) if why else ""
            texts += [checked.text, also] if also else [checked.text]
            timing_text = len(texts)
            if opt.timing:
                with _phase(phases, "timing"):
                    plan = _timing_plan(link, self.pool, problem, stored, checked)
                    timed = timing(link, record, plan)
                diagnostics.placement_windows = timed.placement_windows
                if stored.waited_s:  # for another evaluation's figure of the same reference: a stage of its own
                    phases["reference_wait"] = stored.waited_s
                    phases["timing"] -= stored.waited_s
            if link.defended and gpu and opt.profile:
                with _phase(phases, "profile"):
                    profiled = profile(link, record, opt.policy or s.policy)
                texts.append(profiled.text)
            cand, ref = timed.runtimes.get("candidate"), timed.runtimes.get("reference")
            if link.defended and gpu and cand and ref:  # a new reference's first process is enough for the floor
                roofline(link, record, cand, ref, checked.io_bytes, checked.flops)
            if link.defended:
                with _phase(phases, "dependence"):  # last: whatever a neutralised call leaves behind reaches nothing
                    output_dependence(link, record)
                record_silent_guards(record)
            if timed.further is not None:  # after every check of the candidate: one rejected costs none of it
                began, sizes = time.monotonic(), (*checked.io_bytes, loaded)
                timed = time_further_processes(
                    link,
                    record,
                    plan,
                    timed,
                    lambda n: self._before_further_processes(link, held, sizes, n, diagnostics),
                )
                phases["timing"] += time.monotonic() - began
            if opt.timing:
                phases.update({f"timing_{part}": spent for part, spent in timed.parts_s.items()})
                texts.insert(timing_text, timed.text)
            cand, ref = timed.runtimes.get("candidate"), timed.runtimes.get("reference")
            if gpu and cand and ref:
                flags += review_flags(s, cand, ref)
            stored.save(timed.runtimes, timed.from_cache)  # only an evaluation that passed every check stores
            ended = True
        except EarlyVerdict as early:
            verdict, texts = early.verdict, [early.feedback]
            # How far the candidate got in the stage that ended it, where the result reports that.
            checked = early.reached if isinstance(early.reached, CorrectnessOutcome) else checked
            profiled = early.reached if isinstance(early.reached, ProfileOutcome) else profiled
            ended = True
        finally:
            stored.release()
            io = sum(checked.io_bytes)
            # Not after a failure of the machine's, the reference's, or a cancellation (`ended` unset), nor one
            # whose timing showed an offset of its own (`TimingOutcome.own_offset`), and only up to
            # `reference_keep_max_mb` of tensors: an idle child keeps what its caching allocator holds, all
            # of it where its tensors were small, its model and context alone where they were not (trimmed).
            small = io <= SMALL_TENSOR_BYTES
            keep = ended and not timed.own_offset and io <= s.reference_keep_max_mb << 20
            if keep and (child := link.keep_reference(trim=not small)):
                self.references.keep(self.references.key(link.device, problem), child)
            # A dying CUDA child holds its memory for ~0.1 s, which the next start waited through (`start_drain`,
            # 0.10-0.15 s on an H200): only where its tensors were large, or no run alone would catch a shortage.
            isolation = link.close(light=link.memory_shared and io > 0 and small)
            if checked.compiled:  # Triton compile and autotune time, as the candidate child's hooks measured it
                phases["compile"] = link.compile_total_s
                phases["first_call"] = checked.first_call_s
                if "correctness" in phases:
                    phases["correctness"] -= min(link.compile_total_s, phases["correctness"])
            phases["total"] = time.monotonic() - t0
        return _result(
            link, record, problem, verdict, " ".join(texts), isolation, checked, timed, profiled, flags, phases
        )

    def _sized(self, problem: Problem, held: int, inputs: int, output: int) -> None:
        """Told the reference's input and output bytes on its first call: the problem's need is remembered where it
        was not known, and an evaluation that needs more units than it holds starts again with them."""
        need = device_memory.units(footprint_bytes(inputs, output), self._device_bytes())
        if self._footprints.get(problem) is None:
            self._footprints.set(problem, need)
        if need > held:
            raise DeviceMemoryShort(
                f"the problem's tensors need {need} of the device's {MEMORY_UNITS} memory units, "
                f"and the evaluation held {held}",
                problem_sized=True,
                units=need,
            )

    def _before_further_processes(
        self, link: Link, held: HeldUnits | None, sizes: tuple[int, int, int], n: int, diagnostics: Diagnostics
    ) -> int:
        """Before the reference is timed in `n` further processes, the evaluation gives back the device memory it
        no longer needs: the candidate child, done with, closes; the reference child releases its tensors and its
        cache (it may still be kept for the problem's next candidate); this process frees the buffers it received
        their outputs in. On a shared device it then keeps only the units those processes need (`sizes`: the
        reference's inputs, output and loaded model, in bytes), so another evaluation can start. Where fewer units
        than it holds cover its peak and those processes together, it keeps those and frees nothing first:
        freeing, and the wait for the candidate child's exit, go through the host's driver in turn with every GPU's
        processes, and took seconds on a host of four busy GPUs (docs/benchmarks.md). Returns how many of the
        processes may load side by side: all `n` where the units held cover them so, else one at a time."""
        link.close_candidate()
        # With the device to itself (every unit held, or no units at all), nothing waits beside it.
        shared = held if held is not None and len(held) < MEMORY_UNITS else None
        if shared is None:
            link.release(time.monotonic() + link.settings.timing_timeout_s, link.ref, trim=True)
            link.give_back_buffers()
            return n
        device = self._device_bytes()
        for together in (n, 1):
            whole = footprint_bytes(*sizes[:2]) + further_processes_bytes(*sizes, together)
            if (units := device_memory.units(whole, device)) <= len(shared):
                shared.keep(units)
                diagnostics.memory_units_kept = len(shared)
                return together
        link.release(time.monotonic() + link.settings.timing_timeout_s, link.ref, trim=True)
        link.give_back_buffers()
        drain_closed_children(every=False)  # the candidate's memory is free before its units are
        together = n if device_memory.units(further_processes_bytes(*sizes, n), device) <= len(shared) else 1
        shared.keep(device_memory.units(further_processes_bytes(*sizes, together), device))
        diagnostics.memory_units_kept = len(shared)
        return together

    def _give_back_receive_buffers(self) -> None:
        """What this process received the children's tensors in goes back to the device, not to an idle cache
        (`Link.give_back_buffers` holds the turn); nothing to do for a CPU evaluation's."""
        self._mem_pools, self._arenas = {}, {}
        if self.settings.keep_large_receive_buffers:
            # A buffer a child kept mapped waits in torch's IPC limbo until the child lets go: a reference child
            # at its release, a candidate's when it is gone (this evaluation's, or at the latest the next's).
            torch.cuda.ipc_collect()
        torch.cuda.empty_cache()

    def _device_bytes(self) -> int:
        return torch.cuda.get_device_properties(0).total_memory

    @contextmanager
    def _stay(self, memory: MemoryShare | None) -> Iterator[HeldUnits | None]:
        """An evaluation's stay on a shared device with `memory`, until the children that held it are gone: the
        next evaluation must not meet their memory. Alone, what this process holds idle goes first, and the memory
        of the last evaluations' dying children. Yields the units held (None: the device is this process's)."""
        if memory is None:
            yield None
            return
        slot = self.timing_slot
        assert slot is not None  # memory is only shared under the device lock
        with slot.occupy(memory.units) as held:
            if memory.alone:
                self.references.close()  # this process's idle reference children hold device memory too
                drain_closed_children(every=True)  # an earlier attempt's, whatever they held
                torch.cuda.empty_cache()
                slot.memory_waited_s += device_memory.settle(self._device_bytes())
            try:
                yield held
            finally:
                # With the device alone, its children are gone before the next evaluation has it: on an H100 the next
                # of a problem with 2 x 4 GiB inputs met a dying child's memory and ran out generating its inputs.
                drain_closed_children(every=memory.alone)

    def cancel(self) -> bool:
        """Stop the evaluation in flight, from another thread: its children are killed, so `evaluate` raises
        EvaluationCancelled promptly."""
        link = self._current
        if link is None:
            return False
        link.cancelled = True
        for child in link.children():
            child.kill()
        return True

    def receive_arena(self, role: str) -> ReceiveArena:
        """The evaluation's large receive buffers for `role`'s child, in a pool of their own
        (`keep_large_receive_buffers`)."""
        if role not in self._arenas:
            self._arenas[role] = ReceiveArena(self.receive_pool(f"large {role}"))
        return self._arenas[role]

    def receive_pool(self, kind: str) -> Any:
        """A private CUDA memory pool for buffers children write into, so the segments a child can map never hold
        anything else of the parent's: per `kind`, "reference" and "candidate" for small buffers, whose segments a
        child keeps mapped (services.protocol.tensors.open_cuda) and which must therefore never hold the other
        role's tensors (a candidate's mapping would reach the reference's outputs), and "large" for the rest, which
        no child keeps mapped and which both roles share, so that a freed output's gigabytes serve the next
        ("large candidate" and "large reference" for the arenas of `keep_large_receive_buffers` instead)."""
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


@contextmanager
def _reported(diagnostics: Diagnostics) -> Iterator[None]:
    """An EvaluationError out of the block carries `diagnostics`: the worker logs how a failed evaluation ran too."""
    try:
        yield
    except EvaluationError as exc:
        exc.diagnostics = diagnostics
        raise


@contextmanager
def _phase(phases: dict[str, float], name: str) -> Iterator[None]:
    """Seconds spent in a stage, up to its end or to the verdict that ended the evaluation in it: a failed
    candidate's time is its last stage's, not unaccounted."""
    t = time.monotonic()
    try:
        yield
    finally:
        phases[name] = time.monotonic() - t


def _timing_plan(
    link: Link, pool: ChildPool, problem: Problem, stored: timing_cache.Lookup, checked: CorrectnessOutcome
) -> TimingPlan:
    s, cpu = link.settings, link.device == "cpu"
    large = sum(checked.io_bytes) >= s.placement_min_mb * 2**20
    kept = stored.store is not None
    sides: dict[str, tuple[str, Any]] = {"reference": ("reference", "eager"), "candidate": ("candidate", "eager")}
    if link.options.compare_compile and not cpu:
        sides["compiled"] = ("reference", "compiled")
    return TimingPlan(
        sides,
        stored=stored.load({k: v for k, (_, v) in sides.items() if k != "candidate"}, link.stop_if_cancelled),
        cap_s=s.cpu_timing_budget_s if cpu else (link.options.timing_budget_s or s.timing_budget_s),
        # Several processes only pay off where the figure is kept for the next candidates (a timing store); large
        # inputs are timed over placements in the evaluation's own children instead (on CPU the calls are grouped,
        # nothing moves).
        processes=1 if large else (s.cpu_reference_processes if cpu else s.reference_processes if kept else 1),
        budgeted=kept,
        placements=s.timing_placements if large else 1,
        acquire_references=lambda n: acquire_references(link, pool, n),
        start_references=lambda children: start_references(link, children, problem),
        reference_output=checked.reference_output,
    )


def _result(
    link: Link,
    record: Record,
    problem: Problem,
    verdict: Verdict,
    text: str,
    isolation: tuple[str, str],
    checked: CorrectnessOutcome,
    timed: TimingOutcome,
    profiled: ProfileOutcome,
    flags: list[str],
    phases: dict[str, float],
) -> EvalResult:
    cand = timed.runtimes.get("candidate")
    ref = timed.runtimes.get("reference")
    comp = timed.runtimes.get("compiled")
    meaningful = link.device == "cuda" and cand is not None
    passed = verdict is Verdict.PASSED
    if stood := sorted({c.name for c in record.checks if c.stood_down}):
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
        checks=record.checks,
        profile=profiled.summary,
        flags=flags,
        timings_from_cache=timed.from_cache,
        feedback=feedback.cap(f"[{verdict.value}] {text}".strip(), link.settings.feedback_max_chars),
        phases={k: round(v, 4) for k, v in phases.items()},
        environment=environment(link.device, *isolation),
    )


def environment(device: str, network: str, containment: str = "unknown") -> Environment:
    gpu = uuid = driver = None
    if device == "cuda":
        gpu = torch.cuda.get_device_name(0)
        uuid = str(torch.cuda.get_device_properties(0).uuid)
        try:
            with open("/proc/driver/nvidia/version") as f:
                driver = f.readline().split("Kernel Module")[-1].split()[0]
        except (OSError, IndexError):
            driver = None
    return Environment(
        device=device,
        gpu_name=gpu,
        gpu_uuid=uuid,
        driver=driver,
        cuda=torch.version.cuda,
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        protocol_version=PROTOCOL_VERSION,
        network_isolation=network,
        containment=containment,
    )
