"""The trusted parent: drives a reference child and a candidate child and decides the verdict.

Candidate code never runs here. This process owns the nonce and the seeds, receives the children's
tensors into buffers it allocated, compares them, reduces the raw timing samples into statistics and
checks them against its own wall clock. Every failure of a child maps to a verdict; nothing a child
does can make `evaluate` hang (every wait has a deadline) or lose the result.
"""

from __future__ import annotations

import ast
import hashlib
import hmac
import math
import platform
import secrets
import statistics
import time
from contextlib import nullcontext
from typing import Any

import torch
import triton

from services import defences, feedback, stats, tensors, timing_cache
from services.channel import ProtocolError
from services.compare import Comparison, compare_outputs, inputs_equal, structure_mismatch, tolerance
from services.hidden_shapes import shape_variants
from services.problems import Problem
from services.sandbox import Child, ChildDied, ChildPool, ChildTimedOut
from services.schema import (
    PROTOCOL_VERSION,
    Check,
    CorrectnessSummary,
    Environment,
    EvalOptions,
    EvalResult,
    RuntimeStats,
    Verdict,
)
from services.settings import EvalSettings
from services.static_checks import triage
from services.timing_cache import TimingStore

_MAX_DELIVERY_BYTES = 64 << 30


class EvaluationError(RuntimeError):
    """The evaluation could not run (e.g. the reference itself fails); not the candidate's verdict."""


class _Stop(Exception):
    """Ends an evaluation early with a verdict."""

    def __init__(self, verdict: Verdict, feedback_text: str):
        super().__init__(feedback_text)
        self.verdict = verdict
        self.feedback = feedback_text


class Evaluator:
    """Evaluates candidates against references; keeps warm children between evaluations."""

    def __init__(self, settings: EvalSettings | None = None, pool: ChildPool | None = None):
        self.settings = settings or EvalSettings()
        self.pool = pool or ChildPool(self.settings)
        self._mem_pool: Any = None
        self._current: _Evaluation | None = None

    def evaluate(
        self,
        problem: Problem,
        candidate_source: str,
        options: EvalOptions | None = None,
        timings: TimingStore | None = None,
    ) -> EvalResult:
        """`timings` keeps reference timings between evaluations (see `services.timing_cache`)."""
        evaluation = _Evaluation(self, problem, candidate_source, options or EvalOptions(), timings)
        self._current = evaluation
        try:
            return evaluation.run()
        finally:
            self._current = None

    def cancel(self) -> bool:
        """Stop the evaluation in flight, from another thread: its children are killed, so `evaluate` returns
        (or raises EvaluationError) promptly. The caller knows it cancelled and discards that outcome."""
        evaluation = self._current
        if evaluation is None:
            return False
        evaluation.cancelled = True
        for child in (evaluation.ref, evaluation.cand):
            if child is not None:
                child.kill()
        return True

    def receive_pool(self) -> Any:
        """A private CUDA memory pool for buffers children write into, so the segments a child can map
        never hold anything else of the parent's."""
        if self._mem_pool is None and hasattr(torch.cuda, "MemPool"):
            self._mem_pool = torch.cuda.MemPool()
        return self._mem_pool

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Evaluation:
    def __init__(
        self, ev: Evaluator, problem: Problem, candidate: str, options: EvalOptions, timings: TimingStore | None
    ):
        self.ev = ev
        self.timings = timings
        self.from_cache: list[str] = []  # sides whose statistics came from `timings`, revalidated
        self.timing_keys: dict[str, str] = {}  # reference side -> its key in `timings`
        self.s = ev.settings
        self.problem = problem
        self.candidate = candidate
        self.opt = options
        self.device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise EvaluationError("device 'cuda' requested but no CUDA device is available")
        self.nonce = secrets.token_hex(16)  # authenticates messages; the children hold it
        self.seed_key = secrets.token_bytes(32)  # derives every seed; never leaves this process
        self.rng = secrets.SystemRandom()
        self.trials = options.correctness_trials or self.s.correctness_trials
        self.checks: list[Check] = []
        self.phases: dict[str, float] = {}
        self.compiled = False
        self.correctness: CorrectnessSummary | None = None
        self.runtimes: dict[str, RuntimeStats] = {}
        self.ref: Child | None = None
        self.cand: Child | None = None
        self.cancelled = False
        self.thread_baseline: set[int] = set()
        self.passed_rechecks = 0
        self.defended = self.s.defences
        self.policy = options.policy or self.s.policy
        self.custom_kernels: set[str] = set()
        self.guarded_calls = 0
        self.flops = 0.0
        self.io_bytes = (0, 0)
        self.profile: Any = None
        self.flags: list[str] = []
        # Output digests of every call on fresh inputs (correctness trials and timed calls), per side.
        self.digests: dict[str, list[tuple[int, ...]]] = {"reference": [], "candidate": []}

    # -- helpers -----------------------------------------------------------------------------------
    def seed(self, purpose: str, i: int) -> int:
        digest = hmac.new(self.seed_key, f"{purpose}:{i}".encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:7], "big")

    def tol(self, dtype: torch.dtype) -> tuple[float, float]:
        return tolerance(dtype, self.s.fp32_tol, self.s.half_tol, self.opt.atol, self.opt.rtol)

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        self.checks.append(Check(name=name, passed=passed, detail=detail))
        return passed

    def ask(
        self, child: Child, header: dict[str, Any], deadline: float, what: str, payloads: list[bytes] | None = None
    ) -> tuple[dict[str, Any], list[bytes]]:
        """One command to a child; every way it can go wrong becomes a verdict (candidate) or an
        EvaluationError (reference)."""
        is_ref = child is self.ref
        who = "reference" if is_ref else "candidate"
        try:
            reply, data = child.request(header, deadline, payloads)
        except ChildTimedOut:
            if is_ref:
                raise EvaluationError(f"the reference timed out while {what}") from None
            raise _Stop(
                Verdict.TIMEOUT,
                f"Timed out while {what}; the process was killed. Look for an "
                "infinite loop or a grid that never terminates.",
            ) from None
        except ChildDied as died:
            if is_ref:
                raise EvaluationError(f"the reference process died ({died.reason}) while {what}") from None
            hint = feedback.signal_hint(died.signal_name)
            raise _Stop(
                Verdict.CRASHED, f"The candidate process {died.reason} while {what}" + (f" ({hint})." if hint else ".")
            ) from None
        except ProtocolError as exc:
            if is_ref:
                raise EvaluationError(f"bad message from the reference: {exc}") from None
            raise _Stop(
                Verdict.CRASHED, f"The candidate process broke the result protocol while {what}: {exc}."
            ) from None
        if not is_ref and self.defended:
            self.judge_guards(reply)
        if not reply.get("ok", False):
            error = reply.get("error", "internal")
            tb = feedback.trim_traceback(reply.get("traceback", ""), child.tmpdir)
            if is_ref or error == "reference_error":
                raise EvaluationError(f"{who} failed while {reply.get('context', what)}:\n{tb}")
            verdict = Verdict.COMPILE_ERROR if error == "compile_error" else Verdict.RUNTIME_ERROR
            raise _Stop(verdict, f"Error while {reply.get('context', what)}:\n{tb}")
        return reply, data

    def receive(self, child: Child, what: str, structure: dict[str, Any], deadline: float) -> list[torch.Tensor]:
        """Have a child deliver the tensors of its kept `what` into buffers this process owns."""
        specs = tensors.tensor_specs(structure)
        try:
            tensors.check_alloc(specs, _MAX_DELIVERY_BYTES)
        except ValueError as exc:
            raise _Stop(Verdict.RUNTIME_ERROR, f"Output too large: {exc}.") from None
        if self.device == "cpu":
            _, data = self.ask(child, {"cmd": "deliver", "what": what}, deadline, f"delivering its {what}")
            if len(data) != len(specs):
                raise _Stop(
                    Verdict.CRASHED, "The candidate process delivered a different number of tensors than it described."
                )
            try:
                return [tensors.from_bytes(b, d, shape) for b, (d, shape) in zip(data, specs, strict=True)]
            except ValueError as exc:
                raise _Stop(Verdict.CRASHED, f"The candidate process delivered malformed tensors: {exc}.") from None
        pool = self.ev.receive_pool()
        with torch.cuda.use_mem_pool(pool) if pool is not None else nullcontext():
            bufs = [torch.empty(shape, dtype=d, device="cuda") for d, shape in specs]
        descs = [tensors.share_cuda(b) for b in bufs]
        self.ask(child, {"cmd": "deliver", "what": what, "buffers": descs}, deadline, f"delivering its {what}")
        return bufs

    def guard_process(self, what: str, processes: bool = True) -> None:
        """Threads (and, unless told not to, processes) the candidate left behind, read from /proc."""
        if not self.defended:
            return
        new_threads = self.cand.threads() - self.thread_baseline
        if new_threads and not self.check(
            "no_new_threads", False, f"{len(new_threads)} new OS thread(s) still alive after {what}"
        ):
            raise _Stop(
                Verdict.REJECTED,
                "Rejected: the candidate left new threads running after a call "
                "(work must finish inside forward(), on the caller's stream).",
            )
        procs = self.cand.session_processes() if processes else []
        if procs and not self.check("no_child_processes", False, f"{len(procs)} process(es) alive after {what}"):
            raise _Stop(Verdict.REJECTED, "Rejected: the candidate spawned processes.")

    def judge_guards(self, reply: dict[str, Any]) -> None:
        """Reject on anything the candidate child's guards saw since its last reply."""
        found = defences.guard_violations(reply)
        for v in found:
            self.check(v.code, False, v.detail)
        if found:
            raise _Stop(Verdict.REJECTED, found[0].feedback)

    def require_launches(self, reply: dict[str, Any], what: str) -> None:
        """Every forward call must launch at least one Triton kernel the candidate defines (B7/B8)."""
        if not self.defended:
            return
        missing = defences.missing_launches(reply)
        self.guarded_calls += len(reply.get("launches", []))
        self.custom_kernels |= defences.launched_names(reply)
        if missing:
            self.check(
                "custom_kernel_launched",
                False,
                f"{missing} call(s) in {what} launched no @triton.jit kernel defined by the candidate",
            )
            raise _Stop(
                Verdict.REJECTED,
                "Rejected: forward() must launch your own @triton.jit kernels on every "
                f"call; {what} ran without one (computing the result in PyTorch, or "
                "launching a kernel only once, does not count).",
            )

    def static_triage(self) -> None:
        """AST triage before anything runs: hard findings reject, the rest are reported as advisory. A
        source that does not parse or defines no ModelNew is left to the load, which says exactly why."""
        try:
            tree = ast.parse(self.candidate)
        except SyntaxError:
            return
        if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in ast.walk(tree)):
            return
        findings = triage(self.candidate)
        for f in findings:
            self.checks.append(
                Check(name=f"static_{f.code}", passed=False, detail=f"line {f.line}: {f.detail}", advisory=not f.hard)
            )
        hard = [f for f in findings if f.hard]
        if hard:
            raise _Stop(
                Verdict.REJECTED,
                "Rejected before running: " + "; ".join(f"line {f.line}: {f.detail}" for f in hard[:5]),
            )

    # -- phases ------------------------------------------------------------------------------------
    def run(self) -> EvalResult:
        t0 = time.monotonic()
        verdict, text = Verdict.PASSED, ""
        try:
            if self.defended:
                self.static_triage()
            self.start()
            self.load()
            text = self.correctness_phase()
            if self.opt.timing:
                text += " " + self.timing_phase()
            if self.defended:
                text += self.after_timing()
            self.store_timings()
        except _Stop as stop:
            verdict, text = stop.verdict, stop.feedback
        finally:
            network = self.cand.network if self.cand else "unknown"
            for child in (self.ref, self.cand):
                if child is not None:
                    child.close()
            self.phases["total"] = time.monotonic() - t0
        return self.result(verdict, text, network)

    def start(self) -> None:
        t = time.monotonic()
        self.ref = self.ev.pool.acquire(self.device)
        self.cand = self.ev.pool.acquire(self.device)
        if self.cancelled:
            raise EvaluationError("cancelled")
        deadline = t + self.s.child_start_timeout_s
        job = {
            "nonce": self.nonce,
            "device": self.device,
            "reference_source": self.problem.source,
            "init_seed": self.seed("init", 0),
            "l2_flush_factor": self.s.l2_flush_factor,
            "launch_shield_cycles": self.s.launch_shield_cycles,
            "defences": self.defended,
        }
        for child, role in ((self.ref, "reference"), (self.cand, "candidate")):
            try:
                child.start_job(
                    {**job, "role": role, "candidate_source": self.candidate if role == "candidate" else None}, deadline
                )
            except (ChildDied, ChildTimedOut, ProtocolError) as exc:
                raise EvaluationError(
                    f"a {role} child failed to start: {exc}; output:\n{child.output_tail()}"
                ) from None
        self.phases["start"] = time.monotonic() - t

    def load(self) -> None:
        t = time.monotonic()
        deadline = t + self.s.load_timeout_s
        self.ask(self.ref, {"cmd": "load"}, deadline, "loading the reference")
        self.thread_baseline = self.cand.threads()  # before any candidate code runs
        self.ask(self.cand, {"cmd": "load"}, deadline, "importing and constructing ModelNew")
        self.phases["load"] = time.monotonic() - t

    def correctness_phase(self) -> str:
        t = time.monotonic()
        deadline = t + self.s.load_timeout_s + self.s.correctness_timeout_s
        summary = Comparison()
        atol, rtol = self.tol(torch.float32)
        for i in range(self.trials):
            seed = self.seed("correct", i)
            count_flops = i == 0 and self.device == "cuda" and self.defended
            ref_h, _ = self.ask(
                self.ref, {"cmd": "call", "seed": seed, "count_flops": count_flops}, deadline, "running the reference"
            )
            ref_struct = ref_h["structures"][0]
            if count_flops:
                self.flops = float(ref_h.get("flops") or 0.0)
                self.io_bytes = (tensors.nbytes(ref_h["inputs"]), tensors.nbytes(ref_struct))
            poison = poison_specs(ref_struct)
            what = "compiling and running forward()" if i == 0 else f"running forward() (trial {i + 1})"
            t_call = time.monotonic()
            cand_h, _ = self.ask(
                self.cand, {"cmd": "call", "seed": seed, "repeat": 2 if i == 0 else 1, "poison": poison}, deadline, what
            )
            if i == 0:
                self.compiled = True
                self.phases["compile"] = time.monotonic() - t_call
                atol, rtol = self.first_tolerance(ref_struct)
            self.guard_process(f"correctness trial {i + 1}")
            self.require_launches(cand_h, f"correctness trial {i + 1}")
            self.record_digest("reference", ref_h)
            self.record_digest("candidate", cand_h)
            cand_struct = cand_h["structures"][0]
            if msg := structure_mismatch(ref_struct, cand_struct):
                if cand_struct["t"] == "tensor_subclass":
                    self.check("output_exact_type", False, msg)
                    raise _Stop(Verdict.REJECTED, f"Rejected: {msg}. Return plain tensors computed by forward().")
                self.check("output_structure", False, msg)
                raise _Stop(Verdict.INCORRECT, f"Wrong output on correctness trial {i + 1}: {msg}.")
            self.inputs_phase(ref_h, cand_h, deadline, i)
            ref_out = self.receive(self.ref, "output", ref_struct, deadline)
            cand_out = self.receive(self.cand, "output", cand_struct, deadline)
            cmp = compare_outputs(ref_out, cand_out, self.tol)
            summary.absorb(cmp)
            if not cmp.ok:
                self.record_correctness(summary, i + 1, i, atol, rtol)
                self.check("outputs_match", False, f"trial {i + 1}: {cmp.reason}")
                raise _Stop(Verdict.INCORRECT, feedback.mismatch(i, self.trials, cmp, self.tf32_suspect(cmp, ref_out)))
            if i == 0:
                again = self.receive(self.cand, "output2", cand_h["structures"][1], deadline)
                det = compare_outputs(cand_out, again, self.tol)
                if not self.check("deterministic", det.ok, det.reason or "two calls on the same inputs agree"):
                    raise _Stop(
                        Verdict.INCORRECT,
                        "Two calls of forward() on the same inputs gave different "
                        f"outputs ({det.reason}): this usually means reading "
                        "uninitialised memory or a race between programs.",
                    )
            del ref_out, cand_out
            for child in (self.ref, self.cand):
                self.ask(child, {"cmd": "release"}, deadline, "releasing tensors")
        self.record_correctness(summary, self.trials, self.trials, atol, rtol)
        self.check("outputs_match", True, f"{self.trials}/{self.trials} trials within tolerance")
        if self.defended and self.s.hidden_sizes:
            self.hidden_sizes(deadline)
        self.phases["correctness"] = time.monotonic() - t - self.phases.get("compile", 0.0)
        return (
            f"Correct on {self.trials}/{self.trials} trials (max abs error {summary.max_abs_error:.3g}, "
            f"max rel error {summary.max_rel_error:.3g})."
        )

    def hidden_sizes(self, deadline: float) -> None:
        """One more correctness call per hidden-size variant (services.hidden_shapes): a kernel that is
        right only on the published sizes, or that falls back to PyTorch on others, fails here."""
        checked = []
        for n, sizes in enumerate(shape_variants(self.problem.source)):
            seed = self.seed("hidden", n)
            try:
                ref_h, _ = self.ask(self.ref, {"cmd": "call", "seed": seed, "sizes": sizes}, deadline, "hidden sizes")
            except EvaluationError:
                if self.ref.proc.poll() is not None:
                    raise
                continue  # the reference cannot run these sizes: the problem's constraint, not the candidate's
            shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
            ref_struct = ref_h["structures"][0]
            what = f"running forward() on other input sizes ({shown})"
            cand_h, _ = self.ask(
                self.cand,
                {"cmd": "call", "seed": seed, "sizes": sizes, "poison": poison_specs(ref_struct)},
                deadline,
                what,
            )
            self.guard_process(what)
            self.require_launches(cand_h, what)
            msg = self.output_mismatch(ref_struct, cand_h["structures"][0], deadline)
            for child in (self.ref, self.cand):
                self.ask(child, {"cmd": "release"}, deadline, "releasing tensors")
            if msg is not None:
                self.check("hidden_sizes", False, f"{shown}: {msg}")
                raise _Stop(
                    Verdict.INCORRECT,
                    f"Wrong output when the problem's sizes are changed ({shown}): {msg}. The kernel must be "
                    "correct for any sizes get_inputs() can produce (mask partial blocks; do not hard-code the "
                    "published sizes).",
                )
            checked.append(shown)
        self.check(
            "hidden_sizes",
            True,
            f"correct on {len(checked)} other size variant(s)"
            + (f": {'; '.join(checked)}" if checked else " (none applies to this problem)"),
        )

    def first_tolerance(self, structure: dict[str, Any]) -> tuple[float, float]:
        specs = tensors.tensor_specs(structure)
        return self.tol(specs[0][0]) if specs else self.tol(torch.float32)

    def inputs_phase(self, ref_h: dict[str, Any], cand_h: dict[str, Any], deadline: float, i: int) -> None:
        """The candidate's inputs after its call must equal the reference's after its call: unchanged,
        unless the reference itself works in place, in which case they must be changed alike."""
        ref_in = self.receive(self.ref, "inputs", ref_h["inputs"], deadline)
        if structure_mismatch(ref_h["inputs"], cand_h["inputs"], "inputs"):
            raise _Stop(Verdict.INCORRECT, "The candidate's inputs changed type or shape during forward().")
        cand_in = self.receive(self.cand, "inputs", cand_h["inputs"], deadline)
        if ref_h["mutated"]:
            ok = compare_outputs(ref_in, cand_in, self.tol).ok
            detail = "in-place reference: inputs updated like the reference's"
        else:
            ok = inputs_equal(ref_in, cand_in)
            detail = "inputs bit-identical after forward()"
        if not self.check("inputs_unchanged", ok, detail if ok else f"trial {i + 1}: inputs modified"):
            raise _Stop(
                Verdict.INCORRECT,
                "forward() modified its input tensors; the reference does not. Write results to new output tensors.",
            )

    def record_correctness(self, cmp: Comparison, run: int, passed: int, atol: float, rtol: float) -> None:
        self.correctness = CorrectnessSummary(
            trials_run=run,
            trials_passed=passed,
            atol=atol,
            rtol=rtol,
            max_abs_error=cmp.max_abs_error,
            max_rel_error=cmp.max_rel_error,
            mismatched_elements=cmp.mismatched,
            total_elements=cmp.total,
        )

    def tf32_suspect(self, cmp: Comparison, ref_out: list[torch.Tensor]) -> bool:
        fp32 = any(t.dtype == torch.float32 for t in ref_out)
        return fp32 and "tl.dot" in self.candidate and "ieee" not in self.candidate and cmp.max_rel_error < 5e-2

    def timing_phase(self) -> str:
        t = time.monotonic()
        deadline = t + self.s.timing_timeout_s
        cpu = self.device == "cpu"
        budget = self.s.cpu_timing_budget_s if cpu else (self.opt.timing_budget_s or self.s.timing_budget_s)
        sides = {"reference": (self.ref, "eager"), "candidate": (self.cand, "eager")}
        if self.opt.compare_compile and not cpu:
            sides["compiled"] = (self.ref, "compiled")
        samples: dict[str, list[float]] = {k: [] for k in sides}
        overheads: dict[str, list[float]] = {k: [] for k in sides}
        extras: dict[str, list[float]] = {k: [] for k in sides}
        stored = self.stored_timings(sides)
        counter = 0
        last_cand: tuple[int, dict[str, Any]] | None = None

        def timed(side: str, keep: bool) -> tuple[float, float]:
            nonlocal counter, last_cand
            child, variant = sides[side]
            counter += 1
            seed = self.seed("time", counter)
            sent = time.perf_counter()
            h, _ = self.ask(child, {"cmd": "time", "seed": seed, "variant": variant}, deadline, f"timing ({side})")
            wall_ms = (time.perf_counter() - sent) * 1e3
            ms = float(h["ms"])
            self.record_digest(side, h)
            if not (0 < ms <= wall_ms * 1.01 + 0.05) or not math.isfinite(ms):
                self.check("timing_wall_clock", False, f"{side} reported {ms:.4g} ms inside {wall_ms:.4g} ms")
                raise _Stop(
                    Verdict.REJECTED, "Rejected: a reported time is impossible against the harness's own clock."
                )
            if side == "candidate":
                self.guard_process("a timed call", processes=False)
                self.require_launches(h, "a timed call")
                last_cand = (seed, h["structure"])
                if keep and self.defended and self.rng.random() < self.s.recheck_fraction:
                    self.recheck(seed, h["structure"], deadline)
            extra = float(h.get("sync_extra_ms", 0.0))
            if keep:
                samples[side].append(ms)
                overheads[side].append(wall_ms - ms)
                extras[side].append(extra)
            return wall_ms - ms, extra

        # Warm-up by time, both sides, before any sample counts.
        warm_ms = 0.0 if cpu else self.s.warmup_ms
        slowest = 0.0
        for side in sides:
            spent, calls = 0.0, 0
            while calls < 2 or spent < warm_ms:
                before = time.perf_counter()
                timed(side, keep=False)
                spent += (time.perf_counter() - before) * 1e3
                calls += 1
                if time.monotonic() - t > budget:
                    break
            slowest = max(slowest, spent / calls)
        # The same block length for every side, about 25 ms of the slowest side's calls, so that
        # drift between blocks cancels and every side ends with as many samples.
        block = max(2, min(50, int(25.0 / max(slowest, 1e-3))))
        min_calls = 3 if cpu else self.s.min_timed_calls
        accepted: dict[str, RuntimeStats] = {}
        if stored:
            # Stored reference timings are revalidated on fresh calls, alternating with the candidate's.
            for _ in range(self.s.reference_cache_calls):
                for side in sides:
                    timed(side, keep=True)
            for side, cached in stored.items():
                fresh = statistics.median(samples[side])
                if cached.median_ms > 0 and abs(fresh / cached.median_ms - 1) <= self.s.reference_cache_tolerance:
                    accepted[side] = cached
        measured = [side for side in sides if side not in accepted]
        # The budget shrinks with the sides left to time, so the candidate gets as many calls as without stored
        # timings and the evaluation ends sooner (the loop usually stops on the budget, not the precision).
        budget *= len(measured) / len(sides)
        while True:
            for side in measured:
                for _ in range(block):
                    timed(side, keep=True)
            n = min(len(samples[side]) for side in measured)
            precise = all(
                stats.ci_rel_halfwidth(samples[side]) <= self.s.target_ci_rel
                and sum(samples[side]) >= self.s.min_timed_ms
                for side in measured
            )
            if (n >= min_calls and (precise or time.monotonic() - t > budget)) or n >= self.s.max_timed_calls:
                break
        if self.defended:
            seed, structure = last_cand
            self.recheck(seed, structure, deadline)
            self.distinct_outputs()
        self.runtimes = {side: accepted.get(side) or stats.summarize(v) for side, v in samples.items()}
        self.from_cache = sorted(accepted)
        if self.off_window_suspect(overheads, extras, cpu):
            # Confirm on fresh calls, reference and candidate alternating, before rejecting: a neighbour's
            # burst of host or GPU work can shift one side's overheads for a while, hidden work shifts every call.
            overheads = {"reference": [], "candidate": []}
            extras = {"reference": [], "candidate": []}
            for _ in range(self.s.confirm_calls):
                for side in overheads:
                    over, extra = timed(side, keep=False)
                    overheads[side].append(over)
                    extras[side].append(extra)
        self.guard_process("the timed calls")
        self.wall_clock_checks(overheads, extras, cpu)
        self.phases["timing"] = time.monotonic() - t
        if cpu:
            return "Timing is not meaningful on CPU (Triton interpreter); no speedup is reported."
        cand, ref = self.runtimes["candidate"], self.runtimes["reference"]
        return feedback.timing(cand, ref, ref.median_ms / cand.median_ms)

    def stored_timings(self, sides: dict[str, tuple[Child, str]]) -> dict[str, RuntimeStats]:
        """The reference sides' stored statistics (and their keys, for storing the sides timed in full)."""
        if self.timings is None:
            return {}
        env = environment(self.device, "unknown")
        found = {}
        for side, (_, variant) in sides.items():
            if side != "candidate":
                key = timing_cache.timing_key(self.problem.source, variant, env, self.s)
                self.timing_keys[side] = key
                cached = timing_cache.load(self.timings, key)
                if cached is not None:
                    found[side] = cached
        return found

    def store_timings(self) -> None:
        """Only an evaluation that passed every check stores its reference timings: a candidate that
        disturbed the reference's calls is rejected, and its figures never reach another evaluation."""
        for side, key in self.timing_keys.items():
            if side in self.runtimes and side not in self.from_cache:
                timing_cache.save(self.timings, key, self.runtimes[side])

    def output_mismatch(self, ref_struct: dict[str, Any], cand_struct: dict[str, Any], deadline: float) -> str | None:
        """What is wrong with the candidate's kept output against the reference's, or None when it matches."""
        msg = structure_mismatch(ref_struct, cand_struct)
        if msg is not None:
            return msg
        ref_out = self.receive(self.ref, "output", ref_struct, deadline)
        cand_out = self.receive(self.cand, "output", cand_struct, deadline)
        cmp = compare_outputs(ref_out, cand_out, self.tol)
        return None if cmp.ok else cmp.reason

    def recheck(self, seed: int, cand_struct: dict[str, Any], deadline: float) -> None:
        """Compare a timed call's output with the reference's for the same (unseen) inputs."""
        ref_h, _ = self.ask(self.ref, {"cmd": "call", "seed": seed}, deadline, "re-running the reference")
        msg = self.output_mismatch(ref_h["structures"][0], cand_struct, deadline)
        self.ask(self.ref, {"cmd": "release"}, deadline, "releasing tensors")
        if msg is not None:
            self.check("timed_output_recheck", False, msg)
            raise _Stop(
                Verdict.REJECTED,
                f"Rejected: an output of a timed call was wrong ({msg}) although the "
                "correctness trials passed: outputs must be computed from each "
                "call's inputs (no caching or replay across calls).",
            )
        self.passed_rechecks += 1

    def record_digest(self, side: str, reply: dict[str, Any]) -> None:
        """Output digest of a call on fresh inputs (the compiled-reference side is not tracked)."""
        if reply.get("digest") is not None and side in self.digests:
            self.digests[side].append(tuple(reply["digest"]))

    def distinct_outputs(self) -> None:
        """Every timed call had inputs never seen before, so two identical candidate outputs mean a
        replayed result, unless the reference's outputs repeat too (an output independent of its inputs)."""
        cand, ref = self.digests["candidate"], self.digests["reference"]
        repeats = len(cand) - len(set(cand))
        if repeats and len(ref) == len(set(ref)):
            self.check("timed_output_recheck", False, f"{repeats} timed call(s) returned an earlier call's output")
            raise _Stop(
                Verdict.REJECTED,
                "Rejected: some timed calls returned exactly the output of an earlier "
                "call on different inputs (results cached or replayed across calls).",
            )

    def off_window(self, overheads: dict[str, list[float]]) -> tuple[float, float, float]:
        """Per-call time outside the timed window, candidate and reference (20th percentile), and the excess the
        candidate is allowed."""
        return (
            stats.low_quantile(overheads["candidate"]),
            stats.low_quantile(overheads["reference"]),
            self.s.wall_slack_ms + 0.1 * self.runtimes["candidate"].median_ms,
        )

    def side_stream_excess(self, extras: dict[str, list[float]]) -> float:
        return stats.low_quantile(extras["candidate"]) - stats.low_quantile(extras["reference"])

    def off_window_suspect(self, overheads: dict[str, list[float]], extras: dict[str, list[float]], cpu: bool) -> bool:
        cand_over, ref_over, allowed = self.off_window(overheads)
        return (not cpu and cand_over - ref_over > allowed) or (
            self.defended and self.side_stream_excess(extras) > self.s.side_stream_slack_ms
        )

    def wall_clock_checks(self, overheads: dict[str, list[float]], extras: dict[str, list[float]], cpu: bool) -> None:
        """Work hidden outside the timed window adds a constant to each of the candidate's calls; a low quantile
        of the per-call overhead keeps it while ignoring the scheduling spikes of a loaded host. Not compared
        on CPU, where no speedup is reported and so hidden work would gain nothing."""
        calls = len(overheads["candidate"])
        if not cpu:
            cand_over, ref_over, allowed = self.off_window(overheads)
            excess = cand_over - ref_over
            if not self.check(
                "timing_wall_clock",
                excess <= allowed,
                f"per-call time outside the timed window (20th percentile of {calls} calls): candidate "
                f"{cand_over:.3f} ms, "
                f"reference {ref_over:.3f} ms, excess {excess:.3f} ms (allowed {allowed:.3f} ms)",
            ):
                raise _Stop(
                    Verdict.REJECTED,
                    "Rejected: the harness's wall clock saw much more time per call "
                    "than the candidate's timed window (work outside the timed region).",
                )
        if not self.defended:
            return
        extra = self.side_stream_excess(extras)
        if not self.check(
            "no_side_stream_work",
            extra <= self.s.side_stream_slack_ms,
            f"device-wide sync waited {extra:.3f} ms longer than the stream sync (20th percentile of {calls} calls)",
        ):
            raise _Stop(
                Verdict.REJECTED,
                "Rejected: work was still running on another stream after the "
                "timed call returned; launch everything on the current stream.",
            )
        self.check("timed_output_recheck", True, f"{self.passed_rechecks} timed outputs re-checked")

    def after_timing(self) -> str:
        """Coverage from the profiler, the roofline floor and review flags (GPU), then the record of the
        guards that stayed silent."""
        text = ""
        if self.device == "cuda" and self.opt.profile:
            text += " " + self.profile_phase()
        cand = self.runtimes.get("candidate")
        ref = self.runtimes.get("reference")
        if self.device == "cuda" and cand and ref:
            ok, detail = defences.roofline_detail(
                torch.cuda.get_device_name(0),
                *self.io_bytes,
                self.flops,
                ref.median_ms,
                cand.median_ms,
                self.s.roofline_margin,
            )
            if not self.check("roofline_floor", ok, detail):
                raise _Stop(Verdict.REJECTED, f"Rejected: the measured time is physically impossible ({detail}).")
            if ref.median_ms / cand.median_ms > self.s.review_speedup:
                self.flags.append(f"speedup above {self.s.review_speedup:g}x over eager: review")
        for name, detail in (
            (
                "custom_kernel_launched",
                f"{self.guarded_calls} calls, kernels: {', '.join(sorted(self.custom_kernels))}",
            ),
            ("harness_integrity", "no harness callable replaced"),
            ("numeric_flags", "global numeric flags unchanged"),
            ("sandbox_violation", "no forbidden file, network or process access"),
            ("output_stable_after_return", "outputs unchanged after the call returned"),
            ("no_new_threads", "no threads left running"),
        ):
            self.check(name, True, detail)
        return text

    def profile_phase(self) -> str:
        t = time.monotonic()
        seeds = [self.seed("profile", i) for i in range(self.s.profile_calls)]
        reply, _ = self.ask(
            self.cand, {"cmd": "profile", "seeds": seeds}, t + self.s.timing_timeout_s, "profiling forward()"
        )
        self.custom_kernels |= defences.launched_names(reply)
        self.profile = defences.coverage(reply["kernels"], self.custom_kernels, len(seeds))
        self.phases["profile"] = time.monotonic() - t
        cov = self.profile.coverage
        need = self.s.strict_min_coverage if self.policy == "strict" else 0.0
        ok = cov >= need if need else cov > 0
        needs = f"at least {need:.0%}" if need else "more than 0"
        detail = f"custom kernels {cov:.1%} of GPU time (policy {self.policy} needs {needs})"
        if not self.check("custom_kernel_coverage", ok, detail):
            raise _Stop(
                Verdict.REJECTED,
                f"Rejected: your own Triton kernels account for {cov:.1%} of the GPU time "
                f"(policy {self.policy} needs {needs}); "
                "the rest runs in PyTorch or library kernels.",
            )
        top = ", ".join(
            f"{k.name[:40]} {k.share:.0%}{' (yours)' if k.custom else ''}" for k in self.profile.top_kernels[:3]
        )
        return f"Custom-kernel coverage {cov:.1%}; top GPU kernels: {top}."

    # -- result ------------------------------------------------------------------------------------
    def result(self, verdict: Verdict, text: str, network: str) -> EvalResult:
        cand = self.runtimes.get("candidate")
        ref = self.runtimes.get("reference")
        comp = self.runtimes.get("compiled")
        meaningful = self.device == "cuda" and cand is not None
        passed = verdict is Verdict.PASSED
        return EvalResult(
            problem=self.problem.id,
            verdict=verdict,
            compiled=self.compiled,
            correct=passed,
            speedup=ref.median_ms / cand.median_ms if passed and meaningful else None,
            speedup_vs_compile=comp.median_ms / cand.median_ms if passed and meaningful and comp else None,
            timing_meaningful=meaningful,
            candidate_runtime=cand,
            reference_runtime=ref,
            reference_compile_runtime=comp,
            correctness=self.correctness,
            checks=self.checks,
            profile=self.profile,
            flags=self.flags,
            timings_from_cache=self.from_cache,
            feedback=feedback.cap(f"[{verdict.value}] {text}".strip(), self.s.feedback_max_chars),
            phases={k: round(v, 4) for k, v in self.phases.items()},
            environment=environment(self.device, network),
        )


def poison_specs(structure: dict[str, Any]) -> list[list[Any]]:
    """The (dtype, shape) of each expected output, for the child to poison before the candidate's call."""
    return [[str(d).removeprefix("torch."), s] for d, s in tensors.tensor_specs(structure)]


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
