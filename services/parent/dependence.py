"""Output dependence: the candidate's own kernels must matter to its output.

A decoy launches a trivial Triton kernel (on a scratch buffer) on every call while PyTorch computes the whole
output; it passes the launch rule and, on a GPU, shows some coverage. Here the candidate runs once more, on
inputs it has never seen, with every launch of its own kernels neutralised in the child
(`services.child.guards.LaunchRecorder`: compiled, never run; a CUDA graph that captured them is not replayed),
and the reference runs on the same inputs. If the candidate's output (and, for an in-place reference, its
inputs) still matches the reference's within the tolerance, its kernels can be removed without changing
anything: `rejected`. A neutralised call that fails, crashes or hangs shows that the output needed them.

The call is a correctness call like the others (same command, fresh inputs, poisoned allocator blocks), made after
every other stage: an honest kernel whose absence leaves the process unusable (garbage indices that PyTorch then
gathers with trip a device-side assert on a GPU) must not lose the evaluation, and a stale cached buffer or an
autotune choice made on skipped launches reaches nothing.
"""

from __future__ import annotations

import time

import torch

from services.compare import structure_mismatch
from services.errors import EarlyVerdict
from services.parent.correctness import poison_specs
from services.parent.link import Link
from services.parent.record import Record
from services.protocol import tensors
from services.protocol.messages import Call, Called
from services.schema import CheckName, Measure, Verdict

CHECK = CheckName.OUTPUT_DEPENDS_ON_KERNELS


def output_dependence(link: Link, record: Record) -> None:
    """One reference call and one neutralised candidate call on the same fresh inputs; EarlyVerdict(REJECTED)
    when the candidate is still right without its kernels."""
    deadline = time.monotonic() + link.settings.correctness_timeout_s
    seed = link.seed("dependence", 0)
    ref_h, _ = link.ask(link.ref, Call(seed=seed), Called, deadline, "running the reference")
    ref_struct = ref_h.structures[0]
    what = "running forward() with your kernels' launches skipped"
    try:
        cand_h, _ = link.ask(
            link.cand, Call(seed=seed, poison=poison_specs(ref_struct), neutralised=True), Called, deadline, what
        )
    except EarlyVerdict as failed:
        if failed.verdict is Verdict.REJECTED:  # a guard fired: that verdict stands
            raise
        if record.checks and record.checks[-1].name is CheckName.TIME_LIMIT and not record.checks[-1].passed:
            record.checks.pop()  # a hang here is evidence that the output needs the kernels, not the verdict
        record.check(
            CHECK,
            True,
            f"forward() ended {failed.verdict.value} with the launches of its kernels skipped",
            measured={"neutralised_call": failed.verdict.value},
        )
        return
    record.guard_process(link.cand, what)
    record.require_launches(cand_h.launches, what)
    launched: dict[str, int] = {}
    for called in cand_h.launches:
        for name, n in called.items():
            launched[name] = launched.get(name, 0) + n
    kernels = ", ".join(f"{name} ({n})" for name, n in sorted(launched.items()))
    measured: dict[str, Measure] = {"launches_neutralised": sum(launched.values())}
    specs = tensors.tensor_specs(ref_struct)
    atol, rtol = link.tol(specs[0][0] if specs else torch.float32)
    thresholds: dict[str, Measure] = {"mismatched_elements": 0, "atol": atol, "rtol": rtol}
    cand_struct = cand_h.structures[0]
    same = structure_mismatch(ref_struct, cand_struct) is None
    if same:
        with link.gpu_turn("receiving and comparing the neutralised call's outputs"):
            ref_out = link.receive(link.ref, "output", ref_struct, deadline)
            cand_out = link.receive(link.cand, "output", cand_struct, deadline)
            cmp = link.compare(ref_out, cand_out)
            measured |= {"max_abs_error": cmp.max_abs_error, "mismatched_elements": cmp.mismatched}
            same = cmp.ok
            if same and ref_h.mutated and structure_mismatch(ref_h.inputs, cand_h.inputs, "inputs") is None:
                ref_in = link.receive(link.ref, "inputs", ref_h.inputs, deadline)
                cand_in = link.receive(link.cand, "inputs", cand_h.inputs, deadline)
                same = link.compare(ref_in, cand_in).ok
                measured["inputs_updated_like_the_reference"] = same
    link.release(deadline)
    if same:
        raise record.fail(
            CHECK,
            f"with {measured['launches_neutralised']} launches neutralised ({kernels}) the output still matches "
            "the reference",
            Verdict.REJECTED,
            f"Rejected: with the launches of your Triton kernels skipped ({kernels}), forward() still returned the "
            "correct output: your kernels contribute nothing to the result. Compute the output in your own "
            "@triton.jit kernels; a kernel that runs on a scratch buffer while PyTorch computes the result does "
            "not count.",
            measured=measured,
            thresholds=thresholds,
        )
    record.check(
        CHECK,
        True,
        f"the output changed with {measured['launches_neutralised']} launches neutralised ({kernels})",
        measured=measured,
        thresholds=thresholds,
    )
