"""The parent's link to one evaluation's children: the children, the secrets, and the requests to them.

Every stage talks to the children through `Link.ask`, which turns each way a child can fail into a verdict
(candidate) or ReferenceFailed (reference), and validates each reply against its message class. What the link
observes that bears on the verdict (a time limit, the candidate child's guard reports) goes to the evaluation's
record (`services.parent.record`). The nonce and the seed key never leave this process except the nonce, which
authenticates the children's replies.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import torch

from services import feedback
from services.compare import Comparison, compare_outputs, inputs_equal, structure_mismatch, tolerance
from services.device_lock import TimingSlot
from services.errors import (
    ChildDied,
    ChildError,
    ChildTimedOut,
    DeviceMemoryShort,
    EarlyVerdict,
    EvaluationCancelled,
    ProtocolError,
    ReferenceFailed,
)
from services.parent.receive_arena import ReceiveArena
from services.parent.record import Record
from services.protocol import tensors
from services.protocol.channel import Deadline
from services.protocol.messages import (
    Call,
    Called,
    Command,
    Deliver,
    Delivered,
    Failure,
    Job,
    Kept,
    Recompute,
    Recomputed,
    Release,
    Released,
    Reply,
    Structure,
    Time,
    command_header,
    decode_reply,
    read_compile_clock,
)
from services.sandbox import Child
from services.schema import CheckName, EvalOptions, Measure, Verdict
from services.settings import EvalSettings

MAX_DELIVERY_BYTES = 64 << 30
# An evaluation whose reference inputs and output come to at most this is small: in its correctness trials each
# child hands over its inputs and output together (the reference's with its call's reply after the first; the
# parent then holds both children's inputs and outputs at once), and on a shared device the next start does not
# wait for its dying children (services.evaluator).
SMALL_TENSOR_BYTES = 256 << 20

# Parts of what a call keeps, as a child handed them over (`Link.receive_parts`, `Link.call_and_receive`).
HandedOver = dict[Kept, list[torch.Tensor]]
R = TypeVar("R", bound=Reply)


class _Unshared:
    """No slot: this process is the device's only user (the CLI, tests, a worker of one evaluation at a time)."""

    def __call__(self) -> AbstractContextManager[Any]:
        return nullcontext()

    def shared(self, what: str = "") -> AbstractContextManager[Any]:
        return nullcontext()


@dataclass(frozen=True)
class CallLimit:
    """How long one candidate call may take before Triton compilation is added: a floor plus a multiple of the
    reference's parent-observed time for the same request (`basis` says so in the feedback)."""

    seconds: float
    basis: str


class CallDeadline(Deadline):
    """A candidate call's deadline: the call limit (never past the stage's own deadline), extended by the
    compilation the child reports while the call runs, within what is left of the evaluation's allowance."""

    def __init__(self, link: Link, limit: CallLimit, stage_deadline: float):
        self.link = link
        self.limit = limit
        self.start = time.monotonic()
        self.base = min(self.start + limit.seconds, stage_deadline)
        self.compiled_before = link.compile_total_s
        self.compile_s = 0.0
        super().__init__(self.base, self._with_compilation)

    def allowance_left(self) -> float:
        return max(0.0, self.link.settings.compile_allowance_s - self.link.compile_granted_s)

    def _with_compilation(self) -> float:
        total, started = read_compile_clock(self.link.cand.tmpdir)
        during = total + (time.monotonic() - started if started is not None else 0.0) - self.compiled_before
        self.compile_s = min(self.allowance_left(), max(self.compile_s, during))
        return self.base + self.compile_s

    def timeout_text(self, what: str) -> str:
        s = self.link.settings
        text = f"Timed out while {what}: the call ran past its time limit of {self.base - self.start:.3g} s"
        if self.base - self.start < self.limit.seconds:
            text += " (what was left of the stage's limit)"
        else:
            text += f" ({self.limit.basis})"
        if self.compile_s:
            text += f", extended by {self.compile_s:.3g} s of Triton compilation"
            if self.compile_s >= self.allowance_left():
                text += f", which used up the compile allowance of {s.compile_allowance_s:g} s per evaluation"
        return text + ". The process was killed. Look for an infinite loop or a grid that never terminates."


class Link:
    """One evaluation's children and secrets; what it observes goes to `record`. `slot` is held around
    measurements a concurrent evaluation on the same GPU would disturb, and shared around every other request to a
    child."""

    def __init__(
        self,
        settings: EvalSettings,
        options: EvalOptions,
        device: str,
        record: Record,
        receive_pool: Callable[[str], Any],
        slot: TimingSlot | None = None,
        receive_arena: Callable[[str], ReceiveArena] | None = None,
        memory_shared: bool = False,
        sized: Callable[[int, int], None] | None = None,
        give_back: Callable[[], None] | None = None,
    ):
        self.settings = settings
        self.options = options
        self.device = device
        self.defended = settings.defences
        self.nonce = secrets.token_hex(16)  # authenticates messages; the children hold it
        self._seed_key = secrets.token_bytes(32)  # derives every seed; never leaves this process
        self.rng = secrets.SystemRandom()
        self.record = record
        self.ref: Child | None = None
        self.cand: Child | None = None
        self.others: list[Child] = []  # more reference children, while they time the reference
        self.compiler: Child | None = None  # compiling the candidate's kernels (services.parent.precompile)
        self.cancelled = False
        self.reference_call_s = 0.0  # the slowest reference call the parent has seen (whole request)
        self.compile_total_s = 0.0  # the candidate child's compile time so far, as it reports it
        self.compile_granted_s = 0.0  # deadline extensions granted for compilation (the allowance spent)
        self.gpu_waited_s = 0.0  # waiting for other evaluations' measurements on the device
        self._in_turn = False  # within `gpu_turn`
        # "<child>.<command>" -> {"n": requests, "s": seconds from sending to the reply, waits for GPU turns
        # excluded}: where the evaluation's time goes outside its measurement (the worker logs it); the profile and
        # timed requests' parts as their children report them, as "<child>.profile_<part>" and "<child>.time_<part>"
        # (services.parent.profile, services.parent.timing).
        self.requests: dict[str, dict[str, float]] = {}
        self._receive_pool = receive_pool
        self._receive_arena = receive_arena  # large receive buffers per role, kept (`keep_large_receive_buffers`)
        self.slot: TimingSlot | _Unshared = slot or _Unshared()
        # Other evaluations may hold the device's memory: running out of it is then no child's fault.
        self.memory_shared = memory_shared
        # Told the reference's input and output bytes on its first call; raises DeviceMemoryShort where the
        # evaluation needs more of the shared device's memory than it holds (services.evaluator).
        self.sized = sized or _fits
        self._give_back = give_back  # this process's receive buffers, back to the device (services.evaluator)

    # -- secrets ----------------------------------------------------------------------------------------------
    def seed(self, purpose: str, i: int) -> int:
        digest = hmac.new(self._seed_key, f"{purpose}:{i}".encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:7], "big")

    def tol(self, dtype: torch.dtype) -> tuple[float, float]:
        s = self.settings
        return tolerance(dtype, s.fp32_tol, s.half_tol, self.options.atol, self.options.rtol)

    def stop_if_cancelled(self) -> None:
        """A cancelled evaluation ends here, whatever its killed children's failures look like."""
        if self.cancelled:
            raise EvaluationCancelled("cancelled")

    def job(self, role: str, reference: str, candidate: str | None) -> Job:
        """The job of one of the link's children (a reference, candidate or compiler child)."""
        return Job(
            nonce=self.nonce,
            role=role,
            device=self.device,
            reference_source=reference,
            candidate_source=candidate,
            init_seed=self.seed("init", 0),
            l2_flush_factor=self.settings.l2_flush_factor,
            defences=self.defended,
        )

    def children(self) -> list[Child]:
        return [c for c in (self.ref, self.cand, self.compiler, *self.others) if c is not None]

    def replace(self, old: Child, new: Child) -> None:
        """`new` in `old`'s place among the link's children (one that died before its job)."""
        if self.ref is old:
            self.ref = new
        elif self.cand is old:
            self.cand = new
        else:
            self.others[self.others.index(old)] = new

    def retire(self, child: Child) -> None:
        """Close one of the other reference children (one replaced before its job is no longer among them)."""
        child.close()
        if child in self.others:
            self.others.remove(child)

    def close_candidate(self) -> None:
        """Close the candidate child once its last stage is done; what starts next waits for its memory."""
        if self.cand is not None:
            self.cand.awaited = True
            self.cand.close()

    def keep_reference(self, trim: bool = False) -> Child | None:
        """The reference child, taken out of this link for the next evaluation of its problem once it has
        released its tensors (services.parent.references), and with `trim` its cached device memory; None where
        it cannot serve another: it failed, was killed, or does not answer the release."""
        child = self.ref
        # torch.compile's caches of the compiled reference would grow with every job: such a child is not kept.
        # Nor one with a process left below it or a thread it did not have when ready: what a job started dies with
        # that job, and a thread of a hostile reference would go on running beside other evaluations (their
        # measurements, the receive buffers it keeps mapped) while the child idles.
        if child is None or self.options.compare_compile or not child.idle():
            return None
        if child.descendants() or child.threads() - child.ready_threads:
            return None
        try:
            self.release(time.monotonic() + self.settings.load_timeout_s, child, trim=trim)
        except (ReferenceFailed, EvaluationCancelled, DeviceMemoryShort):
            return None
        self.ref = None
        return child

    def close(self, light: bool = False) -> tuple[str, str]:
        """Close every child; the candidate's network isolation and containment, for the result. `light`: the
        children held only small tensors, so the next job's start need not wait for them to be gone
        (`Child.awaited`)."""
        isolation = (self.cand.network, self.cand.containment) if self.cand else ("unknown", "unknown")
        for child in self.children():
            child.awaited = not light
            child.close()
        self.others.clear()
        return isolation

    def give_back_buffers(self) -> None:
        """What this process received the children's tensors in, back to the device. In a turn of the device's
        slot: memory given back is unmapped, and a memory-bound call measured beside 4 GiB given back in a loop
        took 12% longer on an H200 (docs/benchmarks.md, driver contention). With nothing held there is no turn to
        wait for, and a cancelled evaluation gives them back at once, also one cancelled while it waits."""
        if self._give_back is None:
            return
        at_once = self.cancelled or torch.cuda.memory_reserved() == 0
        try:
            with nullcontext() if at_once else self.gpu_turn("giving back the parent's receive buffers"):
                self._give_back()
        except EvaluationCancelled:  # while waiting for the turn
            self._give_back()
            raise

    # -- talking to the children -------------------------------------------------------------------------
    def call_limit(self) -> CallLimit:
        """The limit of one candidate call: a floor plus a multiple of the slowest reference call seen."""
        s = self.settings
        cpu = self.device == "cpu"
        floor = s.cpu_call_limit_floor_s if cpu else s.call_limit_floor_s
        multiple = s.cpu_call_limit_multiple if cpu else s.call_limit_multiple
        return CallLimit(
            floor + multiple * self.reference_call_s,
            f"{floor:g} s + {multiple:g} x the reference's {self.reference_call_s:.3g} s for the same call",
        )

    @contextmanager
    def gpu_turn(self, what: str) -> Iterator[None]:
        """The device's slot, shared, for requests and this process's own GPU work (a no-op during this
        evaluation's own measurement, and within a turn already held): a stage that receives tensors and compares
        them holds one turn for both, since between two turns a waiting measurement would go first and the stage
        would wait all of it."""
        if self._in_turn:
            yield
            return
        asked = time.monotonic()
        with self.slot.shared(what):
            self.gpu_waited_s += time.monotonic() - asked
            self._in_turn = True
            try:
                yield
            finally:
                self._in_turn = False

    # -- this process's own GPU work: beside other evaluations' requests, never during their measurements -------
    def compare(self, ref: list[torch.Tensor], cand: list[torch.Tensor]) -> Comparison:
        """`compare_outputs` with this evaluation's tolerances. Comparing the outputs of KernelBench's published
        sizes reads gigabytes: during another evaluation's timed calls it would take their memory bandwidth."""
        with self.gpu_turn("comparing tensors in the parent"):
            return compare_outputs(ref, cand, self.tol)

    def inputs_equal(self, before: list[torch.Tensor], after: list[torch.Tensor]) -> bool:
        """`services.compare.inputs_equal`, in a turn as `compare` is."""
        with self.gpu_turn("comparing inputs in the parent"):
            return inputs_equal(before, after)

    def digest(self, found: list[torch.Tensor]) -> list[int]:
        """The output digest (`tensors.fingerprint`) of tensors this process holds, in a turn as `compare` is."""
        with self.gpu_turn("digesting tensors in the parent"):
            return tensors.fingerprint(found).tolist()

    def alike(self, first: list[torch.Tensor], others: list[list[torch.Tensor]]) -> bool:
        """Whether each of `others` matches `first` within the tolerances or by its output digest, in one turn."""
        with self.gpu_turn("comparing tensors in the parent"):
            digest = tensors.fingerprint(first).tolist()
            return all(
                compare_outputs(first, other, self.tol).ok or tensors.fingerprint(other).tolist() == digest
                for other in others
            )

    def tally(self, kind: str, seconds: float, n: int = 1) -> None:
        """Count `n` requests (or parts of them) of `kind` and their seconds in `requests`."""
        counted = self.requests.setdefault(kind, {"n": 0, "s": 0.0})
        counted["n"] += n
        counted["s"] += seconds

    def ask(
        self,
        child: Child,
        command: Command,
        expect: type[R],
        deadline: float,
        what: str,
        payloads: list[bytes] | None = None,
        posted_at: float | None = None,
        turn: bool = True,
    ) -> tuple[R, list[bytes]]:
        """One command to a child; every way it can go wrong becomes a verdict (candidate) or
        ReferenceFailed (reference): whatever either prints, it is never the machine's fault. A candidate's
        forward calls run under a CallDeadline (the stage's `deadline` caps it). Outside a measurement the
        request holds the slot shared: it waits while another evaluation measures on the device, and that wait,
        not the evaluation's own time, moves every deadline of the evaluation back. With `posted_at` the command
        went out then (`post`), and only its reply is taken. Without `turn` the request holds no turn: only for a
        command under which the child runs none of its user's code and no kernel (`StartProfiler`)."""
        is_ref = child is not self.cand
        self.stop_if_cancelled()
        limited = not is_ref and isinstance(command, Call | Time)
        if limited and posted_at is not None:
            raise ValueError("a candidate's call is sent under its own deadline, never posted ahead")
        wait: float | CallDeadline = deadline
        try:
            with self.gpu_turn(what) if turn else nullcontext():
                # Waiting for other evaluations' measurements is not this evaluation's time.
                deadline += self.gpu_waited_s
                wait = CallDeadline(self, self.call_limit(), deadline) if limited else deadline
                if posted_at is None:
                    sent = time.monotonic()
                    header, data = child.request(command_header(command), wait, payloads)
                else:
                    sent = posted_at
                    header, data = child.reply(wait)
                self.tally(f"{'reference' if is_ref else 'candidate'}.{command.cmd}", time.monotonic() - sent)
            reply = decode_reply(expect, header)
        except ChildTimedOut as timed_out:
            self.stop_if_cancelled()
            if is_ref:
                raise _reference_failure(timed_out, what) from None
            limit_s = wait.base + wait.compile_s - sent if isinstance(wait, CallDeadline) else deadline - sent
            self.record.check(
                CheckName.TIME_LIMIT,
                False,
                f"no reply while {what}",
                measured={"waited_s": round(time.monotonic() - sent, 3)},
                thresholds={"limit_s": round(limit_s, 3)},
            )
            if isinstance(wait, CallDeadline):
                raise EarlyVerdict(Verdict.TIMEOUT, wait.timeout_text(what)) from None
            raise EarlyVerdict(
                Verdict.TIMEOUT,
                f"Timed out while {what}; the process was killed. Look for an "
                "infinite loop or a grid that never terminates.",
            ) from None
        except ChildDied as died:
            self.stop_if_cancelled()
            if is_ref:
                raise _reference_failure(died, what) from None
            hint = feedback.signal_hint(died.signal_name)
            text = f"The candidate process {died.reason} while {what}" + (f" ({hint})." if hint else ".")
            raise EarlyVerdict(Verdict.CRASHED, text) from None
        except ProtocolError as exc:
            if is_ref:
                raise _reference_failure(exc, what) from None
            raise EarlyVerdict(
                Verdict.CRASHED, f"The candidate process broke the result protocol while {what}: {exc}."
            ) from None
        finally:
            if isinstance(wait, CallDeadline):
                self.compile_granted_s += wait.compile_s
        return self._judged(child, command, reply, what, sent), data

    def post(self, child: Child, command: Command) -> float:
        """Send a command whose reply `ask` takes later (its `posted_at`, the time returned), so that the child
        works while this process asks another. A child already gone says so when its reply is asked for."""
        self.stop_if_cancelled()
        sent = time.monotonic()
        with suppress(ChildDied):
            child.post(command_header(command))
        return sent

    def ask_references(
        self, children: list[Child], commands: list[Command], expect: type[R], deadline: float, what: str
    ) -> list[R]:
        """A command to each of several reference children, all sent before any reply is read, so that the
        children work side by side; then each reply as `ask` takes it."""
        assert self.cand not in children  # a candidate's calls run under their own CallDeadline (`ask`)
        self.stop_if_cancelled()
        try:
            with self.gpu_turn(what):
                deadline += self.gpu_waited_s
                sent = time.monotonic()
                for child, command in zip(children, commands, strict=True):
                    child.post(command_header(command))
                replies = [decode_reply(expect, child.reply(deadline)[0]) for child in children]
                self.tally(f"reference.{commands[0].cmd}", time.monotonic() - sent, len(children))
        except (ChildTimedOut, ChildDied, ProtocolError) as exc:
            self.stop_if_cancelled()
            raise _reference_failure(exc, what) from None
        return [
            self._judged(child, command, reply, what, sent)
            for child, command, reply in zip(children, commands, replies, strict=True)
        ]

    def _judged(self, child: Child, command: Command, reply: R, what: str, sent: float) -> R:
        """A decoded reply, once what it says of its child is taken into account: a reference call's time, the
        candidate's compilation and guards, a sandbox violation, a failure reported (a verdict, or ReferenceFailed)."""
        is_ref = child is not self.cand
        if is_ref and isinstance(command, Call):
            self.reference_call_s = max(self.reference_call_s, time.monotonic() - sent)
        if not is_ref:
            self.compile_total_s = reply.compile_total_s
        if not is_ref and self.defended:
            self.record.judge_guards(reply)
        if is_ref and reply.violations:  # the reference's code tried what the sandbox refuses: the request's fault
            raise ReferenceFailed(f"the reference broke the sandbox while {what}: {'; '.join(reply.violations[:5])}")
        if isinstance(reply, Failure):
            tb = feedback.trim_traceback(reply.traceback, child.tmpdir)
            context = reply.context or what
            if reply.out_of_memory and self.memory_shared:
                raise DeviceMemoryShort(f"the device ran out of memory while {context}", problem_sized=is_ref)
            if is_ref or reply.error == "reference_error":
                who = "reference" if is_ref else "reference, in the candidate's process,"
                raise ReferenceFailed(f"{who} failed while {context}:\n{tb}")
            verdict = Verdict.COMPILE_ERROR if reply.error == "compile_error" else Verdict.RUNTIME_ERROR
            raise EarlyVerdict(verdict, f"Error while {context}:\n{tb}")
        return reply

    def release(self, deadline: float, *children: Child, trim: bool = False) -> None:
        for child in children or (self.ref, self.cand):
            self.ask(child, Release(trim=trim), Released, deadline, "releasing tensors")

    def receive(self, child: Child, what: Kept, structure: Structure, deadline: float) -> list[torch.Tensor]:
        """Have a child deliver the tensors of its kept `what` into buffers this process owns."""
        return self.receive_parts(child, {what: structure}, deadline)[what]

    def receive_parts(
        self, child: Child, parts: dict[Kept, Structure], deadline: float
    ) -> dict[Kept, list[torch.Tensor]]:
        """`receive` for several kept parts (of these structures) in one request."""
        what = list(parts)
        specs, bufs, descs = self._buffers(child, list(parts.values()))
        _, data = self.ask(
            child, Deliver(what=what, buffers=descs), Delivered, deadline, f"delivering its {' and '.join(what)}"
        )
        return _split(parts, _taken(bufs, data, specs))

    def receive_copies(self, indices: list[int], structure: Structure, deadline: float) -> list[list[torch.Tensor]]:
        """The candidate's timed outputs it copied aside (`Time.retain_previous`) at `indices`, each of `structure`
        (the reference's: a copy of another was never asked for), in one request."""
        specs, bufs, descs = self._buffers(self.cand, [structure] * len(indices))
        what = f"delivering its {len(indices)} retained output(s)"
        _, data = self.ask(
            self.cand, Deliver(what=["retained"], buffers=descs, indices=indices), Delivered, deadline, what
        )
        return _chunks(_taken(bufs, data, specs), len(indices))

    def recompute(self, seeds: list[int], structure: Structure, deadline: float) -> list[list[torch.Tensor]] | None:
        """The reference's outputs for `seeds` in one request, into buffers for `structure` (its own, from its
        first call); None where an output's structure differed."""
        specs, bufs, descs = self._buffers(self.ref, [structure] * len(seeds))
        h, data = self.ask(
            self.ref, Recompute(seeds=seeds, buffers=descs), Recomputed, deadline, "re-running the reference"
        )
        if not h.delivered or any(s != structure for s in h.structures):
            return None
        return _chunks(_taken(bufs, data, specs), len(seeds))

    def call_and_receive(
        self, child: Child, call: Call, expect: dict[Kept, Structure] | None, deadline: float, what: str
    ) -> tuple[Called, HandedOver | None]:
        """A Call to a reference child whose reply hands over the parts of what it keeps that `expect` names
        (`Call.deliver`; none without `expect`), into buffers for the structures it expects (an earlier call's on
        the same sizes): a request fewer. None for the tensors where the call's structures differ (`receive` still
        reaches what the child kept). Never a candidate's: its code runs during the call, and must not reach this
        process's buffers."""
        if child is self.cand:
            raise ValueError("tensors come with the reply of a reference call only")
        if expect is None:
            return self.ask(child, call, Called, deadline, what)[0], None
        specs, bufs, descs = self._buffers(child, list(expect.values()))
        h, data = self.ask(child, replace(call, deliver=list(expect), buffers=descs), Called, deadline, what)
        if not (h.delivered and all(_kept_structure(h, p) == expect[p] for p in expect)):
            return h, None
        return h, _split(expect, _taken(bufs, data, specs))

    def _buffers(
        self, child: Child | None, structures: list[Structure]
    ) -> tuple[list[tuple[torch.dtype, list[int]]], list[torch.Tensor] | None, list[dict[str, Any]] | None]:
        """The tensors of `structures`, one after another, within what this process allocates for them; on CUDA
        buffers this process owns for `child` to copy them into and their IPC descriptors, on CPU none: the tensors
        come as payloads. Small buffers come from a receive pool of the child's role, large ones from one shared
        pool (services.evaluator.Evaluator.receive_pool), or, given `receive_arena`, from the role's arena."""
        specs = tensors.tensor_specs({"t": "tuple", "items": structures})
        try:
            tensors.check_alloc(specs, MAX_DELIVERY_BYTES)
        except ValueError as exc:
            raise EarlyVerdict(Verdict.RUNTIME_ERROR, f"Output too large: {exc}.") from None
        if self.device == "cpu":
            return specs, None, None
        role = "candidate" if child is self.cand else "reference"
        bufs, descs = [], []
        for d, shape in specs:
            small = tensors.spec_bytes(d, shape) <= tensors.SMALL_BUFFER_BYTES
            if not small and self._receive_arena is not None:
                bufs.append(self._receive_arena(role).take(d, shape))
                descs.append(tensors.share_cuda(bufs[-1], keep=True))
                continue
            pool = self._receive_pool(role if small else "large")
            with torch.cuda.use_mem_pool(pool) if pool is not None else nullcontext():
                bufs.append(torch.empty(shape, dtype=d, device="cuda"))
            descs.append(tensors.share_cuda(bufs[-1], keep=small))
        return specs, bufs, descs

    def output_mismatch(
        self,
        ref_struct: Structure,
        cand_struct: Structure,
        deadline: float,
        cand_out: list[torch.Tensor] | None = None,
        ref_out: list[torch.Tensor] | None = None,
    ) -> tuple[str | None, dict[str, Measure]]:
        """What is wrong with the candidate's output (`cand_out`, else the one it kept) against the reference's
        (`ref_out`, else the one it kept; None when it matches), and what the comparison measured."""
        msg = structure_mismatch(ref_struct, cand_struct)
        if msg is not None:
            return msg, {"structure_matches": False}
        with self.gpu_turn("receiving and comparing outputs"):
            if ref_out is None:
                ref_out = self.receive(self.ref, "output", ref_struct, deadline)
            if cand_out is None:
                cand_out = self.receive(self.cand, "output", cand_struct, deadline)
            cmp = self.compare(ref_out, cand_out)
        measured: dict[str, Measure] = {"max_abs_error": cmp.max_abs_error, "mismatched_elements": cmp.mismatched}
        return (None if cmp.ok else cmp.reason), measured

    def tolerance_of(self, structure: Structure) -> dict[str, Measure]:
        """The thresholds an output of this structure is compared with."""
        specs = tensors.tensor_specs(structure)
        atol, rtol = self.tol(specs[0][0] if specs else torch.float32)
        return {"structure_matches": True, "mismatched_elements": 0, "atol": atol, "rtol": rtol}


def _reference_failure(exc: ChildError, what: str) -> ReferenceFailed:
    """A reference child's fault while `what`, as the request's: its code, never the machine's."""
    if isinstance(exc, ChildTimedOut):
        return ReferenceFailed(f"the reference timed out while {what}")
    if isinstance(exc, ChildDied):
        return ReferenceFailed(f"the reference process died ({exc.reason}) while {what}")
    return ReferenceFailed(f"bad message from the reference: {exc}")


def _kept_structure(h: Called, part: Kept) -> Structure | None:
    """A part of what a call keeps, as its reply describes it (`output2`: the repeat's output)."""
    if part == "inputs":
        return h.inputs
    outputs = h.structures[:1] if part == "output" else h.structures[-1:]
    return outputs[0] if outputs else None


def _split(parts: dict[Kept, Structure], got: list[torch.Tensor]) -> dict[Kept, list[torch.Tensor]]:
    """Tensors handed over for `parts`, in order, by part."""
    split, start = {}, 0
    for part, structure in parts.items():
        n = len(tensors.tensor_specs(structure))
        split[part], start = got[start : start + n], start + n
    return split


def _chunks(got: list[torch.Tensor], n: int) -> list[list[torch.Tensor]]:
    """`n` values' tensors handed over one value after another, each value's in a list (equal counts)."""
    each = len(got) // n if n else 0
    return [got[i * each : (i + 1) * each] for i in range(n)]


def _taken(
    bufs: list[torch.Tensor] | None, data: list[bytes], specs: list[tuple[torch.dtype, list[int]]]
) -> list[torch.Tensor]:
    """What a child handed over: into the buffers (CUDA), else as payloads (CPU)."""
    return bufs if bufs is not None else _unpack(data, specs)


def _unpack(data: list[bytes], specs: list[tuple[torch.dtype, list[int]]]) -> list[torch.Tensor]:
    """Tensors a CPU child sent as payloads, one per spec."""
    if len(data) != len(specs):
        raise EarlyVerdict(
            Verdict.CRASHED, "The candidate process delivered a different number of tensors than it described."
        )
    try:
        return [tensors.from_bytes(b, d, shape) for b, (d, shape) in zip(data, specs, strict=True)]
    except ValueError as exc:
        raise EarlyVerdict(Verdict.CRASHED, f"The candidate process delivered malformed tensors: {exc}.") from None


def _fits(inputs: int, output: int) -> None:
    """The device is this evaluation's: whatever the tensors' sizes, there is no more memory to wait for."""
