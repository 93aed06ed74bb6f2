"""Correctness: reference and candidate on the same fresh inputs, trial after trial, compared in the parent.

The first candidate call compiles its kernels and runs twice (the determinism check); every call's inputs are
compared after the call with the reference's (unchanged, or changed alike by an in-place reference). For problems
and policies that ask for shape generality, hidden sizes then repeat one call per changed variant of the problem's
sizes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from services import feedback
from services.compare import Comparison, structure_mismatch
from services.errors import EarlyVerdict, ReferenceFailed, reaching
from services.hidden_shapes import describe, shape_variants
from services.parent.link import SMALL_TENSOR_BYTES, HandedOver, Link
from services.parent.record import Record
from services.protocol import tensors
from services.protocol.messages import Call, Called, Kept, Structure
from services.sandbox import LAUNCHERS, Child
from services.schema import CheckName, CorrectnessSummary, Verdict


@dataclass
class CorrectnessOutcome:
    """Filled in as the stage goes, so that a result ended early still reports how far the candidate got (the
    EarlyVerdict's `reached`)."""

    compiled: bool = False  # the first candidate call returned (its kernels compiled)
    # That call's request in seconds, waits for GPU turns excluded: two forward calls (the determinism check) with
    # the kernels' compilation and, on Triton 3.6, their launchers' builds, all while it holds the device shared.
    first_call_s: float = 0.0
    summary: CorrectnessSummary | None = None  # set when all trials pass or one mismatches
    flops: float = 0.0  # counted on the reference's first call (GPU, defences on), for the roofline floor
    io_bytes: tuple[int, int] = (0, 0)  # the reference's input and output bytes (roofline floor, child drain)
    reference_output: Structure | None = None  # the reference's first output, as it described it (re-checks)
    text: str = ""


def correctness(link: Link, record: Record, trials: int, candidate_source: str) -> CorrectnessOutcome:
    """`trials` calls on fresh inputs; EarlyVerdict at the first wrong output, changed input or nondeterminism."""
    out = CorrectnessOutcome()
    with reaching(out):
        s = link.settings
        deadline = time.monotonic() + s.load_timeout_s + s.correctness_timeout_s
        summary = Comparison()
        atol, rtol = link.tol(torch.float32)
        # Where the tensors are small, each child hands over its inputs and output in one request, and after the
        # first trial the reference's come with its call's reply (the next trials' sizes are the first's): on a shared
        # GPU every request waits for its turn.
        expect: dict[Kept, Structure] | None = None
        for i in range(trials):
            seed = link.seed("correct", i)
            count_flops = i == 0 and link.device == "cuda" and link.defended
            ref_h, ref_got = link.call_and_receive(
                link.ref, Call(seed=seed, count_flops=count_flops), expect, deadline, "running the reference"
            )
            ref_struct = ref_h.structures[0]
            if count_flops:
                out.flops = float(ref_h.flops or 0.0)
            if i == 0:
                out.reference_output = ref_struct
                out.io_bytes = (tensors.nbytes(ref_h.inputs), tensors.nbytes(ref_struct))
                link.sized(*out.io_bytes)  # before the candidate's first call: it may wait for more memory
                small = sum(out.io_bytes) <= SMALL_TENSOR_BYTES
                # Checked unchanged by their digests in the children, not delivered (`_large_inputs_after_call`).
                large_inputs = out.io_bytes[0] > link.settings.digest_inputs_mb * 2**20
            what = "compiling and running forward()" if i == 0 else f"running forward() (trial {i + 1})"
            asked, waited = time.monotonic(), link.gpu_waited_s
            cand_h, _ = link.ask(
                link.cand,
                Call(
                    seed=seed,
                    repeat=2 if i == 0 else 1,
                    poison=poison_specs(ref_struct),
                    digest_inputs=large_inputs,
                ),
                Called,
                deadline,
                what,
            )
            if i == 0:
                out.compiled = True
                LAUNCHERS.want(cand_h.launchers)
                out.first_call_s = time.monotonic() - asked - (link.gpu_waited_s - waited)
                specs = tensors.tensor_specs(ref_struct)
                atol, rtol = link.tol(specs[0][0] if specs else torch.float32)
            record.guard_process(link.cand, f"correctness trial {i + 1}")
            record.require_launches(cand_h.launches, f"correctness trial {i + 1}")
            record.record_digest(seed, cand_h.digest)
            cand_struct = cand_h.structures[0]
            if msg := structure_mismatch(ref_struct, cand_struct):
                if cand_struct["t"] == "tensor_subclass":
                    raise record.fail(
                        CheckName.OUTPUT_EXACT_TYPE,
                        msg,
                        Verdict.REJECTED,
                        f"Rejected: {msg}. Return plain tensors computed by forward().",
                        measured={"type": str(cand_struct["type"])},
                        thresholds={"type": "torch.Tensor"},
                    )
                raise record.fail(
                    CheckName.OUTPUT_STRUCTURE,
                    msg,
                    Verdict.INCORRECT,
                    f"Wrong output on correctness trial {i + 1}: {msg}.",
                )
            if structure_mismatch(ref_h.inputs, cand_h.inputs, "inputs"):
                raise EarlyVerdict(Verdict.INCORRECT, "The candidate's inputs changed type or shape during forward().")
            # Received and compared in one turn of the device: between two, a waiting measurement would go first.
            with link.gpu_turn(f"receiving and comparing trial {i + 1}"):
                cand_got = None
                if small:
                    if ref_got is None:
                        ref_got = link.receive_parts(link.ref, {"inputs": ref_h.inputs, "output": ref_struct}, deadline)
                    cand_got = link.receive_parts(link.cand, _kept(cand_h, i), deadline)
                if ref_h.mutated or not large_inputs:
                    ref_in = _handed(link, link.ref, ref_got, "inputs", ref_h.inputs, deadline)
                    cand_in = _handed(link, link.cand, cand_got, "inputs", cand_h.inputs, deadline)
                    _inputs_after_call(link, record, ref_h, ref_in, cand_in, i)
                    del ref_in, cand_in  # large ones: gone before the outputs arrive
                else:
                    _large_inputs_after_call(record, ref_h, cand_h, i)
                ref_out = _handed(link, link.ref, ref_got, "output", ref_struct, deadline)
                cand_out = _handed(link, link.cand, cand_got, "output", cand_struct, deadline)
                cmp = link.compare(ref_out, cand_out)
                summary.absorb(cmp)
                if not cmp.ok:
                    out.summary = _summary(summary, i + 1, i, atol, rtol)
                    wrong = record.fail(
                        CheckName.OUTPUTS_MATCH,
                        f"trial {i + 1}: {cmp.reason}",
                        Verdict.INCORRECT,
                        feedback.mismatch(i, trials, cmp, _tf32_suspect(candidate_source, cmp, ref_out)),
                    )
                    # The evaluation ends: its buffers go back in this turn rather than one waited for at its close.
                    del ref_out, cand_out, ref_got, cand_got
                    link.give_back_buffers()
                    raise wrong
                # This process holds at most two outputs at once: at KernelBench's published sizes one is 7.5 GB, and an
                # H100's 80 GB held the evaluation's parent and children only just (docs/benchmarks.md).
                del ref_out, ref_got
                if i == 0:
                    again = _handed(link, link.cand, cand_got, "output2", cand_h.structures[1], deadline)
                    det = link.compare(cand_out, again)
                    del again
                    if not det.ok and _reference_varies(link, seed, ref_struct, deadline):
                        record.stand_down(
                            CheckName.DETERMINISTIC,
                            f"two calls on the same inputs differ ({det.reason}), and so do the reference's own",
                            {"mismatched_elements": det.mismatched},
                        )
                    elif not record.check(
                        CheckName.DETERMINISTIC, det.ok, det.reason or "two calls on the same inputs agree"
                    ):
                        raise EarlyVerdict(
                            Verdict.INCORRECT,
                            "Two calls of forward() on the same inputs gave different "
                            f"outputs ({det.reason}): this usually means reading "
                            "uninitialised memory or a race between programs.",
                        )
                del cand_out, cand_got
            if i == 0 and small:
                expect = {"inputs": ref_h.inputs, "output": ref_struct}
        # Once: each trial's Call drops what the child kept from the last before it runs, so a release between
        # trials would only cost a request (and, on a shared GPU, a wait for its turn).
        link.release(deadline)
        out.summary = _summary(summary, trials, trials, atol, rtol)
        record.check(CheckName.OUTPUTS_MATCH, True, f"{trials}/{trials} trials within tolerance")
        out.text = (
            f"Correct on {trials}/{trials} trials (max abs error {summary.max_abs_error:.3g}, "
            f"max rel error {summary.max_rel_error:.3g})."
        )

    return out


def hidden_sizes(link: Link, record: Record, reference_source: str, why: str) -> str:
    """One more correctness call per changed-size variant (services.hidden_shapes), for a problem or policy that
    asks for shape generality (`why`): a kernel that is right only on the published sizes, or that falls back to
    PyTorch on others, fails here, and every failure names the sizes. Returns what the feedback adds ("" where no
    variant applies)."""
    s = link.settings
    deadline = time.monotonic() + s.correctness_timeout_s
    checked = []
    for n, sizes in enumerate(shape_variants(reference_source)):
        seed = link.seed("hidden", n)
        try:
            ref_h, _ = link.ask(link.ref, Call(seed=seed, sizes=sizes), Called, deadline, "hidden sizes")
        except ReferenceFailed:
            if link.ref.proc.poll() is not None:
                raise
            continue  # the reference cannot run these sizes: the problem's constraint, not the candidate's
        shown = describe(sizes)
        ref_struct = ref_h.structures[0]
        what = f"running forward() on changed input sizes ({shown})"
        try:
            cand_h, _ = link.ask(
                link.cand, Call(seed=seed, sizes=sizes, poison=poison_specs(ref_struct)), Called, deadline, what
            )
        except EarlyVerdict as failed:
            if failed.verdict is Verdict.REJECTED:
                raise
            raise record.fail(
                CheckName.HIDDEN_SIZES,
                f"{shown}: {failed.verdict.value}",
                failed.verdict,
                f"With the problem's sizes changed to {shown} ({why}): {failed.feedback}",
            ) from None
        record.guard_process(link.cand, what)
        record.require_launches(cand_h.launches, what)
        msg, measured = link.output_mismatch(ref_struct, cand_h.structures[0], deadline)
        if msg is not None:
            raise record.fail(
                CheckName.HIDDEN_SIZES,
                f"{shown}: {msg}",
                Verdict.INCORRECT,
                f"Wrong output when the problem's sizes are changed to {shown} ({why}): {msg}. Mask partial "
                "blocks and read sizes from the inputs instead of hard-coding the published ones.",
                measured | sizes,
                link.tolerance_of(ref_struct),
            )
        checked.append(shown)
    link.release(deadline)
    record.check(
        CheckName.HIDDEN_SIZES,
        True,
        f"correct on {len(checked)} changed size variant(s)"
        + (f": {'; '.join(checked)}" if checked else " (none applies to this problem)"),
    )
    return f"Also correct with the sizes changed to {'; '.join(checked)} ({why})." if checked else ""


def _reference_varies(link: Link, seed: int, structure: Structure, deadline: float) -> bool:
    """Whether two calls of the reference on the inputs of `seed` differ beyond the tolerance: a check of
    determinism that the problem's own reference fails is no evidence against a candidate."""
    twice = {"output": structure, "output2": structure}
    h, got = link.call_and_receive(link.ref, Call(seed=seed, repeat=2), twice, deadline, "running the reference")
    if got is None:
        if h.structures[1] != structure:
            return True
        got = link.receive_parts(link.ref, twice, deadline)
    return not link.compare(got["output"], got["output2"]).ok


def poison_specs(structure: Structure) -> list[tuple[str, list[int]]]:
    """The (dtype, shape) of each expected output, for the child to poison before the candidate's call."""
    return [(tensors.dtype_name(d), s) for d, s in tensors.tensor_specs(structure)]


def _kept(h: Called, i: int) -> dict[Kept, Structure]:
    """What a correctness call keeps that the parent compares: its inputs and output, on the first trial also
    the repeat's output."""
    return {"inputs": h.inputs, "output": h.structures[0]} | ({"output2": h.structures[1]} if i == 0 else {})


def _handed(
    link: Link, child: Child, got: HandedOver | None, what: Kept, structure: Structure, deadline: float
) -> list[torch.Tensor]:
    """What the child handed over already, else what it kept, delivered now (large tensors, one part at a time)."""
    return got[what] if got is not None else link.receive(child, what, structure, deadline)


MODIFIED_INPUTS = "forward() modified its input tensors; the reference does not. Write results to new output tensors."


def _inputs_after_call(
    link: Link, record: Record, ref_h: Called, ref_in: list[torch.Tensor], cand_in: list[torch.Tensor], i: int
) -> None:
    """The candidate's inputs after its call must equal the reference's after its call: unchanged,
    unless the reference itself works in place, in which case they must be changed alike."""
    if ref_h.mutated:
        ok = link.compare(ref_in, cand_in).ok
        detail = "in-place reference: inputs updated like the reference's"
        wrong = "inputs not updated like the reference's"
        text = (
            "The reference updates its input tensors in place and the candidate's inputs differ from the "
            "reference's after the call: apply the same in-place update."
        )
    else:
        ok = link.inputs_equal(ref_in, cand_in)
        detail = "inputs bit-identical after forward()"
        wrong = "inputs modified"
        text = MODIFIED_INPUTS
    if not record.check(CheckName.INPUTS_UNCHANGED, ok, detail if ok else f"trial {i + 1}: {wrong}"):
        raise EarlyVerdict(Verdict.INCORRECT, text)


def _large_inputs_after_call(record: Record, ref_h: Called, cand_h: Called, i: int) -> None:
    """`_inputs_after_call` for large inputs the reference leaves unchanged, by their digests: both children drew
    them from one seed, so unchanged inputs have the reference's digest. The candidate's digest is computed in its
    own process by harness code bound before its import (services.child.runtime), as every output digest is."""
    ok = cand_h.inputs_digest == ref_h.inputs_digest
    detail = "inputs unchanged after forward() (by digest: large inputs)"
    if not record.check(CheckName.INPUTS_UNCHANGED, ok, detail if ok else f"trial {i + 1}: inputs modified"):
        raise EarlyVerdict(Verdict.INCORRECT, MODIFIED_INPUTS)


def _summary(cmp: Comparison, run: int, passed: int, atol: float, rtol: float) -> CorrectnessSummary:
    return CorrectnessSummary(
        trials_run=run,
        trials_passed=passed,
        atol=atol,
        rtol=rtol,
        max_abs_error=cmp.max_abs_error,
        max_rel_error=cmp.max_rel_error,
        mismatched_elements=cmp.mismatched,
        total_elements=cmp.total,
    )


def _tf32_suspect(candidate: str, cmp: Comparison, ref_out: list[torch.Tensor]) -> bool:
    fp32 = any(t.dtype == torch.float32 for t in ref_out)
    return fp32 and "tl.dot" in candidate and "ieee" not in candidate and cmp.max_rel_error < 5e-2
