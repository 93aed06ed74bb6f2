"""The evaluation path on a real GPU: honest kernels pass with meaningful timing, crashes and the
timing attacks that only a GPU can express are caught. Skipped without CUDA."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterator

import pytest
import torch
from helpers import (
    AUTOTUNED,
    IN_PLACE_BODY,
    IN_PLACE_KERNEL,
    IN_PLACE_REFERENCE,
    TUNED_BODY,
    WILD_ACCESS,
    bundled_source,
    relu_candidate,
    unique,
)
from test_evaluate import timed_over_placements
from test_reference_sandbox import forking_attack_harms_nothing

from gym_worker.health import probe
from services import sandbox
from services.errors import ReferenceFailed
from services.problems import Problem
from services.schema import EvalOptions, Verdict
from services.stats import stop_target
from services.timing_cache import MemoryTimingStore

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

CUDA = EvalOptions(device="cuda", timing_budget_s=2.0)
NO_TIMING = EvalOptions(device="cuda", timing=False)


@pytest.mark.parametrize(
    "problem_id", ["level1/1_ReLU", "level1/4_Softmax_rows", "level1/6_Matmul", "level2/1_Linear_Bias_ReLU"]
)
def test_honest_kernel_passes_with_timing(evaluator, problems, problem_id):
    result = evaluator.evaluate(problems.load(problem_id), bundled_source(problem_id), CUDA).result
    assert result.verdict is Verdict.PASSED, [c for c in result.checks if not c.passed]
    assert result.timing_meaningful and result.speedup is not None and result.speedup > 0
    assert result.candidate_runtime.trials >= 20 and result.reference_runtime.trials >= 20
    assert result.environment.gpu_name and result.environment.gpu_uuid
    assert all(c.passed for c in result.checks), result.checks
    # The request ran under the socket filter and, in a root worker's child, without capabilities.
    assert result.environment.network_isolation.endswith("sockets: local sockets only")
    assert "capabilities: dropped" in result.environment.containment or os.geteuid() != 0


def test_illegal_memory_access_is_a_clear_verdict_and_next_evaluation_unaffected(evaluator, relu):
    result = evaluator.evaluate(relu, WILD_ACCESS, NO_TIMING).result
    assert result.verdict in (Verdict.RUNTIME_ERROR, Verdict.CRASHED)
    assert evaluator.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).result.verdict is Verdict.PASSED


def test_huge_gpu_allocation_is_runtime_error(evaluator, relu):
    body = "junk = torch.empty(1 << 50, dtype=torch.uint8, device=x.device)\nreturn triton_relu(x)"
    result = evaluator.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "memory" in result.feedback.lower()


def test_side_stream_work_is_rejected(evaluator, problems):
    problem = problems.load("level1/6_Matmul")
    body = (
        bundled_source("level1/6_Matmul").replace("class ModelNew", "class _Honest")
        + """

class ModelNew(_Honest):
    def forward(self, A, B):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = super().forward(A, B)
            torch.cuda._sleep(2_000_000)  # about a millisecond of GPU time the caller's events never see
        return out
"""
    )
    result = evaluator.evaluate(problem, body, CUDA).result
    assert result.verdict is Verdict.REJECTED, result.feedback


def test_background_thread_is_rejected(evaluator, relu):
    body = """
import threading
out = torch.empty_like(x)
def late():
    import time
    time.sleep(0.001)
    out.copy_(torch.relu(x))
threading.Thread(target=late).start()
return out
"""
    result = evaluator.evaluate(relu, relu_candidate(body), CUDA).result
    assert result.verdict in (Verdict.REJECTED, Verdict.INCORRECT)
    assert not result.correct


@pytest.mark.parametrize(
    ("op", "expr"), [("x.add_(1.0)", "x + 1.0"), ("x.clamp_(min=0.0)", "tl.where(x < 0.0, 0.0, x)")]
)
def test_faithful_in_place_candidate_passes(evaluator, op, expr):
    problem = Problem(id="inplace", source=IN_PLACE_REFERENCE.format(op=op))
    result = evaluator.evaluate(problem, relu_candidate(IN_PLACE_BODY, IN_PLACE_KERNEL.format(expr=expr)), CUDA).result
    assert result.verdict is Verdict.PASSED, [c for c in result.checks if not c.passed]


def test_a_reference_with_a_real_illegal_memory_access_is_the_requests_fault(evaluator, relu):
    """What quarantined a GPU before: now the request fails, and the next evaluation runs as usual."""
    source = """
import torch
import triton
import triton.language as tl


@triton.jit
def _wild(x_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + far
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


class Model(torch.nn.Module):
    def forward(self, x):
        _wild[(1,)](x, 1 << 40, BLOCK=128)
        torch.cuda.synchronize()
        return x


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""
    with pytest.raises(ReferenceFailed):
        evaluator.evaluate(Problem(id="wild", source=source), bundled_source("level1/1_ReLU"), NO_TIMING)
    assert probe(evaluator, "cuda") is None  # the worker's health probe: the device is fine


def test_a_reference_that_forks_setsid_and_kills_harms_no_other_gpu_evaluation(evaluator, relu):
    """Issue 39's attack where the children hold CUDA contexts and the parent's buffers through CUDA IPC."""
    forking_attack_harms_nothing(evaluator, relu, NO_TIMING)
    assert probe(evaluator, "cuda") is None


def test_adaptive_timing_reports_the_precision_it_reached(evaluator, relu):
    result = evaluator.evaluate(relu, bundled_source("level1/1_ReLU"), EvalOptions(device="cuda")).result
    cand, ref = result.candidate_runtime, result.reference_runtime
    assert result.verdict is Verdict.PASSED
    # The 1% target, or 1.6 ticks of the event timer where those are wider (a median of a few microseconds).
    for side in (cand, ref):
        assert side.ci95_target_rel == pytest.approx(stop_target(side.median_ms, 0.01, 3.2e-5, 1.6)), side
    # Precise, or stopped at a cap: the width reached is reported either way.
    assert cand.ci95_rel_halfwidth <= cand.ci95_target_rel or cand.trials >= 2000 or result.phases["timing"] >= 10
    assert ref.processes == 1 and cand.processes == 1  # no timing store: nothing to amortise more processes over


def test_large_inputs_are_timed_over_several_placements_of_them_and_no_further_reference_process(relu, tmp_path):
    # A memory-bound kernel's time depends on the pages its inputs lie on (KLDivLoss at KernelBench's published
    # size: 0.786-0.992 ms over 32 placements, an H100); each placement here moves the inputs.
    timed_over_placements(relu, CUDA, device_lock=str(tmp_path / "gpu.lock"))


def test_the_launch_shield_keeps_host_time_out_of_a_microsecond_kernels_samples(evaluator, problems):
    """A Triton wrapper's forward() spends ~0.2 ms on the host; a spin shorter than that left 10% of a 4.5 us
    kernel's calls at 60 us, and the median's CI never reached its target. The shield grows until the launches
    are queued before the window opens, so the candidate converges well before the call cap."""
    result = evaluator.evaluate(problems.load("level1/5_RMSNorm"), bundled_source("level1/5_RMSNorm"), CUDA).result
    cand = result.candidate_runtime
    assert result.verdict is Verdict.PASSED
    assert cand.launch_shield_cycles >= 1_000_000
    assert cand.uncovered_calls <= 0.05 * cand.trials, cand
    assert cand.ci95_rel_halfwidth <= cand.ci95_target_rel and cand.trials < 500, cand


def test_a_stored_reference_timing_is_reused_by_the_next_candidates(evaluator, relu):
    # Reuse is a statistical test on fresh calls in a fresh child: through the service on an H200,
    # 97-99% of the evaluations whose reference was stored reused it, and a GPU run of this test failed where it
    # asked that of one evaluation. Of two, one must.
    store = MemoryTimingStore()
    first = evaluator.evaluate(relu, unique(bundled_source("level1/1_ReLU")), EvalOptions(device="cuda"), store).result
    assert first.timings_from_cache == []
    processes = first.reference_runtime.processes
    assert 3 <= processes <= 5 and len(first.reference_runtime.process_medians_ms) == processes
    results = [first]
    for _ in range(2):
        results.append(
            evaluator.evaluate(relu, unique(bundled_source("level1/1_ReLU")), EvalOptions(device="cuda"), store).result
        )
    # Reused as it stood: not timed again (a re-timing whose other processes agreed also reuses it, at full cost).
    reused = [r.timings_from_cache == ["reference"] and "timing_reference_processes" not in r.phases for r in results]
    n = next((n for n, ok in enumerate(reused) if ok), None)
    assert n is not None, [r.timings_from_cache for r in results]
    timed = [r for r in results[:n] if not r.timings_from_cache][-1]  # the last one to time it stored it
    assert results[n].reference_runtime == timed.reference_runtime
    assert results[n].phases["timing"] < timed.phases["timing"]


def test_a_new_microsecond_references_timed_calls_stay_within_its_budget(evaluator, problems):
    # Issue 34's target: a new reference in at most 1 s of device time where its calls take under 1 ms. A row sum's
    # reference took 13 s on an H200 before the budget (5 processes, each to the 2,000-call cap). Each process may
    # pass its share by its warm-up (30 ms) and one block of calls (~25 ms).
    problem = problems.load("level1/3_Sum_dim1")
    source = unique(bundled_source("level1/3_Sum_dim1"))
    result = evaluator.evaluate(problem, source, EvalOptions(device="cuda"), MemoryTimingStore()).result
    ref = result.reference_runtime
    assert result.verdict is Verdict.PASSED and ref.median_ms < 1.0 and ref.processes >= 3
    budget = evaluator.settings.reference_budget_fast_s + ref.processes * 0.06
    assert 0 < result.phases["timing_reference_calls"] <= budget, result.phases


def test_a_kernel_launch_then_an_endless_loop_times_out_within_20_s(evaluator, relu):
    start = time.monotonic()
    result = evaluator.evaluate(relu, relu_candidate("y = triton_relu(x)\nwhile True:\n    pass"), NO_TIMING).result
    assert result.verdict is Verdict.TIMEOUT
    assert time.monotonic() - start < 20
    # The limit that was hit, with its value: the call's own, or what was left of the stage's when that is less.
    limit = r"time limit of [\d.]+ s \((5 s \+ 20 x the reference's|what was left of the stage's limit)"
    assert re.search(limit, result.feedback), result.feedback


def test_compilation_measured_by_the_hooks_extends_a_short_call_limit(relu):
    # A first call that compiles and autotunes 12 configs takes seconds; with a 0.2 s call limit it passes only
    # because the child's compile hooks report that time and the parent extends the deadline by it.
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    short = {"correctness_trials": 2, "warm_children": 1, "call_limit_floor_s": 0.2, "call_limit_multiple": 1}
    with Evaluator(EvalSettings(**short)) as ev:
        result = ev.evaluate(relu, relu_candidate(TUNED_BODY, AUTOTUNED), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert result.phases["compile"] > 0.2
    with Evaluator(EvalSettings(**short, compile_allowance_s=0)) as ev:
        result = ev.evaluate(relu, relu_candidate(TUNED_BODY, AUTOTUNED), NO_TIMING).result
    assert result.verdict is Verdict.TIMEOUT and "time limit of" in result.feedback


def test_the_compiler_child_compiles_the_candidates_kernels_and_changes_no_verdict(relu):
    # #13: with `precompile`, the candidate's kernels are compiled while the models load, in a child that sees no
    # GPU, and copied into the candidate child's cache. No speed is claimed here: since children do Triton's
    # per-process work before they are ready, the ReLU's first-call compile was 0.055 s without it and 0.066 s
    # with it on an H100 (2026-11-25, c1aef10); what it saves on large autotuned kernels is not yet measured.
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    settings = EvalSettings(correctness_trials=2, warm_children=1, precompile=True)
    with Evaluator(settings) as ev:
        plain, diagnostics = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), NO_TIMING)
        tuned, tuned_diagnostics = ev.evaluate(relu, relu_candidate(TUNED_BODY, AUTOTUNED), NO_TIMING)
    outcome, tuned_outcome = diagnostics.precompile, tuned_diagnostics.precompile
    assert plain.verdict is tuned.verdict is Verdict.PASSED, (plain.feedback, tuned.feedback)
    assert outcome.kernels == 1 and outcome.stopped == "" and outcome.copied_files > 0
    assert tuned_outcome.kernels == 12 and tuned_outcome.stopped == "" and tuned_outcome.copied_files > 0


def test_the_compiler_child_cannot_reach_the_gpu(relu, tmp_path):
    # Candidate code runs in the compiler child with no device slot held: it must find no GPU, whatever it tries.
    from services.parent.link import Link
    from services.parent.precompile import begin_precompile, finish_precompile
    from services.parent.record import Record
    from services.sandbox import ChildPool
    from services.settings import EvalSettings

    body = """import os
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
try:
    torch._C._cuda_init()
    reached = torch._C._cuda_getDeviceCount()
except RuntimeError:
    reached = 0
raise ValueError(f"devices={reached}")"""
    settings = EvalSettings()
    pool = ChildPool(settings, size=0)
    try:
        link = Link(settings, EvalOptions(), "cuda", Record(settings.defences), lambda role: None)
        pending = begin_precompile(link, pool, relu, relu_candidate(body), torch.cuda.get_device_capability())
        outcome = finish_precompile(link, pending, str(tmp_path / "cache"))
    finally:
        pool.close()
    assert outcome.stopped == "forward(): ValueError: devices=0", outcome.stopped


def test_gpu_children_are_ready_with_tritons_per_process_work_done_and_its_driver_module_built_once():
    # #13: a first call held the device for Triton's own start-up (hashing libtriton.so for the cache key, building
    # its driver module with the C compiler); children now do it while they wait, and build the module once.
    import os

    from services import sandbox
    from services.settings import EvalSettings

    first = sandbox.Child("cuda", EvalSettings())
    try:
        first.wait_ready(time.monotonic() + 120)
        assert sandbox._SEED.path is not None
        seeded = set(os.listdir(sandbox._SEED.path))
        assert seeded and seeded <= set(os.listdir(os.path.join(first.tmpdir, sandbox.TRITON_CACHE)))
        later = sandbox.Child("cuda", EvalSettings())
        try:  # planted before it starts, so its warm-up finds the module instead of compiling it
            assert seeded <= set(os.listdir(os.path.join(later.tmpdir, sandbox.TRITON_CACHE)))
            later.wait_ready(time.monotonic() + 120)
        finally:
            later.close()
    finally:
        first.close()


def test_seeding_the_generators_directly_draws_what_torch_manual_seed_draws():
    from services.child.runtime import seed_everything

    torch.zeros(1, device="cuda")  # CUDA initialised, as in a child: the direct path
    draws = []
    for seed_with in (torch.manual_seed, seed_everything):
        seed_with(1234)
        draws.append((torch.rand(5, device="cuda").cpu(), torch.rand(5), torch.randn(3, device="cuda").cpu()))
    assert all(torch.equal(a, b) for a, b in zip(*draws, strict=True))


# ReLU on 4 GiB (16384 x 65536 floats), as KernelBench's published sizes are.
RELU_4GB = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16384, 65536) - 0.5]


def get_init_inputs():
    return []
"""


def test_an_honest_kernel_with_a_gigabytes_output_is_not_taken_for_side_stream_work(evaluator):
    # The output digest the harness enqueues behind each timed call's end event takes milliseconds on 4 GB; timed
    # as work left on another stream, it got honest KernelBench kernels at published sizes rejected.
    result = evaluator.evaluate(Problem(id="relu_4gb", source=RELU_4GB), bundled_source("level1/1_ReLU"), CUDA).result
    assert result.verdict is Verdict.PASSED, [c for c in result.checks if not c.passed]


@contextlib.contextmanager
def _neighbour_holding_all_but_4_gib(lock) -> Iterator[None]:
    """Another evaluation on the device, holding all but 4 GiB of its memory for 5 s after the block starts."""
    from services.device_lock import TimingSlot

    neighbour, inside, leave = TimingSlot(lock), threading.Event(), threading.Event()

    def other_evaluation() -> None:
        with neighbour.occupy(1):
            hog = torch.empty(torch.cuda.mem_get_info()[0] - (4 << 30), dtype=torch.uint8, device="cuda")
            inside.set()
            leave.wait(60)
            del hog
            torch.cuda.empty_cache()

    other = threading.Thread(target=other_evaluation)
    other.start()
    assert inside.wait(30)
    threading.Timer(5.0, leave.set).start()
    try:
        yield
    finally:
        other.join(60)


def test_an_evaluation_out_of_memory_beside_another_runs_again_with_the_device_to_itself(relu, tmp_path):
    # Pipelined evaluations share the device's memory: KernelBench problems at published sizes exhausted an
    # H200 three at a time. Running out beside another is no one's fault; alone, the candidate's buffer fits.
    from services.device_lock import MEMORY_UNITS
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    lock = tmp_path / "gpu.lock"
    body = "scratch = torch.empty(8 << 30, dtype=torch.uint8, device=x.device)\nreturn triton_relu(x)"
    settings = EvalSettings(correctness_trials=2, warm_children=2, device_lock=str(lock), device_evaluations=2)
    with Evaluator(settings) as ev:
        assert ev.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).result.verdict is Verdict.PASSED  # warm
        with _neighbour_holding_all_but_4_gib(lock):
            result, diagnostics = ev.evaluate(relu, relu_candidate(body), NO_TIMING)
        assert result.verdict is Verdict.PASSED, result.feedback
        assert diagnostics.memory_retries == 1 and diagnostics.memory_units == MEMORY_UNITS
        assert ev.timing_slot.memory_waited_s > 0.5
        # The candidate's own buffer ran out, which says nothing of the problem's next candidates.
        result, diagnostics = ev.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING)
        assert result.verdict is Verdict.PASSED
        assert diagnostics.memory_units < MEMORY_UNITS and diagnostics.memory_retries == 0


def test_a_problem_whose_reference_ran_out_of_memory_beside_another_starts_its_next_candidates_alone(relu, tmp_path):
    # #13: KernelBench at published sizes through the pipelined worker: 6 of 8 evaluations failed once beside
    # others and ran again alone (44 s waiting). The problem's sizes are the cause (here an 8 GiB intermediate its
    # tensors do not show), so its next candidates start with the device to themselves.
    from services.device_lock import MEMORY_UNITS
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    lock = tmp_path / "gpu.lock"
    large = Problem(
        "level1/relu_8_gib_scratch",
        relu.source.replace(
            "return torch.relu(x)",
            "torch.empty(8 << 30, dtype=torch.uint8, device=x.device)\n        return torch.relu(x)",
        ),
    )
    settings = EvalSettings(correctness_trials=2, warm_children=2, device_lock=str(lock), device_evaluations=2)
    with Evaluator(settings) as ev:
        assert ev.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).result.verdict is Verdict.PASSED  # warm
        with _neighbour_holding_all_but_4_gib(lock):
            first, diagnostics = ev.evaluate(large, unique(bundled_source("level1/1_ReLU")), NO_TIMING)
        assert first.verdict is Verdict.PASSED, first.feedback
        assert diagnostics.memory_retries == 1 and diagnostics.memory_units == MEMORY_UNITS
        with _neighbour_holding_all_but_4_gib(lock):
            second, diagnostics = ev.evaluate(large, unique(bundled_source("level1/1_ReLU")), NO_TIMING)
        assert second.verdict is Verdict.PASSED, second.feedback
        assert diagnostics.memory_retries == 0 and diagnostics.memory_units == MEMORY_UNITS
        assert ev.timing_slot.memory_waited_s > 0.5
        # Its children are gone before the device is another's: the next of a loss problem with 2 x 4 GiB inputs,
        # started alone behind one still dying, ran out of memory generating them.
        assert all(child.proc.poll() is not None for child in sandbox._SUPERVISOR._reaping)


def test_an_evaluation_with_the_device_to_itself_waits_for_memory_still_being_freed():
    # At 4 in flight on an H100, a reference alone ran out of memory with 116 MB free: the last evaluations'
    # children were still dying when their units were free.
    from services.device_memory import settle

    total = torch.cuda.get_device_properties(0).total_memory
    held = [torch.empty(total // 5, dtype=torch.uint8, device="cuda")]  # below the shared part while it is held

    def free() -> None:
        held.clear()
        torch.cuda.empty_cache()

    threading.Timer(0.3, free).start()
    waited = settle(total)
    assert not held and 0.3 <= waited < 5


def test_a_problem_whose_tensors_pass_its_share_of_memory_waits_for_its_units_before_the_candidate_runs(tmp_path):
    # On one H100 with two evaluations in flight, 9 of 51 evaluations of a KernelBench step ran out of memory beside
    # the other and started again alone. 4 GiB in and out need more than an eighth of the device at their peak: the
    # estimate from the reference's first call starts the evaluation again with its units before the candidate ran.
    from services.device_lock import MEMORY_UNITS
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    problem = Problem(id="relu_4gb_shared", source=RELU_4GB)
    settings = EvalSettings(correctness_trials=2, device_lock=str(tmp_path / "gpu.lock"), device_evaluations=8)
    with Evaluator(settings) as ev:
        result, diagnostics = ev.evaluate(problem, unique(bundled_source("level1/1_ReLU")), NO_TIMING)
        assert result.verdict is Verdict.PASSED, result.feedback
        assert diagnostics.memory_retries == 1 and diagnostics.memory_units > MEMORY_UNITS // 8
        assert result.phases["earlier_attempts"] > 0  # the phases add up to the evaluation's whole time
        need = diagnostics.memory_units
        result, diagnostics = ev.evaluate(problem, unique(bundled_source("level1/1_ReLU")), NO_TIMING)
        assert result.verdict is Verdict.PASSED
        assert diagnostics.memory_retries == 0 and diagnostics.memory_units == need
        assert "earlier_attempts" not in result.phases


def test_an_evaluation_gives_back_the_units_a_new_references_further_processes_do_not_need(relu, tmp_path):
    # On 4 H100s busy at once, starting and loading a new reference's further processes took a passed evaluation
    # 4.3 s while it held its whole share. They run after the candidate's last stage, the candidate child closed,
    # and hold only what one reference process needs: another evaluation can start beside them.
    from services.device_lock import MEMORY_UNITS
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    settings = EvalSettings(correctness_trials=1, device_lock=str(tmp_path / "gpu.lock"), device_evaluations=2)
    with Evaluator(settings) as ev:
        result, diagnostics = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CUDA, MemoryTimingStore())
    assert result.verdict is Verdict.PASSED, result.feedback
    assert result.reference_runtime.processes >= 3
    assert diagnostics.memory_units == MEMORY_UNITS // 2 and 1 <= diagnostics.memory_units_kept < MEMORY_UNITS // 2


def test_a_wait_for_memory_units_is_memory_wait_and_not_within_the_stages_total(relu, tmp_path):
    # The stay on the device begins after the parent's own checks, inside the stages' clock: its wait is to be
    # counted once, as `memory_wait`, or the benches' shares count it twice.
    from pathlib import Path

    from services.device_lock import MEMORY_UNITS, TimingSlot
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    settings = EvalSettings(correctness_trials=1, device_lock=str(tmp_path / "gpu.lock"))
    other, held = TimingSlot(Path(settings.device_lock)), threading.Event()

    def hold_every_unit() -> None:
        with other.occupy(MEMORY_UNITS):
            held.set()
            time.sleep(1.0)

    with Evaluator(settings) as ev:
        holder = threading.Thread(target=hold_every_unit)
        holder.start()
        assert held.wait(30)
        began = time.monotonic()
        result = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), NO_TIMING).result
        wall = time.monotonic() - began
        holder.join()
    assert result.verdict is Verdict.PASSED, result.feedback
    assert result.phases["memory_wait"] >= 0.5
    assert result.phases["total"] + result.phases["memory_wait"] <= wall + 0.01, (result.phases, wall)


def test_on_a_shared_device_the_next_start_does_not_wait_for_the_last_evaluations_small_children_to_die(relu, tmp_path):
    # #13: `start` is to take <= 0.1 s at steady state; it had been the previous evaluation's CUDA children dying
    # (0.10-0.15 s on an H200). With tensors this small, the next evaluation starts beside them.
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    with Evaluator(EvalSettings(correctness_trials=2, warm_children=2, device_lock=str(tmp_path / "gpu.lock"))) as ev:
        first = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), NO_TIMING).result
        second, diagnostics = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), NO_TIMING)
    assert first.verdict is second.verdict is Verdict.PASSED
    assert second.phases["start_drain"] < 0.03, second.phases
    # One evaluation in flight holds every memory unit as its share, and is not alone for it: its idle reference
    # child stays for the problem's next candidate.
    assert diagnostics.reference_kept


_FIRST_REQUEST = """
import sys, time, torch
from services.child.boot import _warm_device_code, import_harness
from services.protocol.tensors import fingerprint
torch.cuda.init(); torch.empty(1, device="cuda"); import_harness()
if sys.argv[1] == "warm":
    _warm_device_code()
image, weight = torch.rand(8, 64, 56, 56, device="cuda"), torch.rand(64, 64, 3, 3, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
fingerprint([torch.randn(255, device="cuda", dtype=torch.float16)]).tolist()
a = torch.rand(16, 16, device="cuda")
(a @ a).sum().item()
t1 = time.perf_counter()
torch.nn.functional.conv2d(image, weight).sum().item()
print(t1 - t0, time.perf_counter() - t1)
"""


def test_a_gpu_childs_warm_up_loads_the_device_code_of_its_first_requests():
    # #13: CUDA loads each kernel on its first launch; a child's first digest, generator and matmul (the cuBLAS
    # handle) took 0.1-0.3 s of its first requests on an H200 until the child loaded them while it waited. A
    # problem's first convolution paid cuDNN's handle: 386 ms cold, 90 ms after a warm-up without a convolution.
    import subprocess
    import sys

    seconds = {}
    for mode in ("cold", "warm"):
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_REQUEST, mode], capture_output=True, text=True, timeout=300, check=True
        )
        assert "warm-up stopped" not in done.stderr, done.stderr
        seconds[mode] = [float(s) for s in done.stdout.split()[-2:]]
    (harness_cold, conv_cold), (harness_warm, conv_warm) = seconds["cold"], seconds["warm"]
    assert harness_warm * 3 < harness_cold, seconds
    assert conv_warm * 4 < conv_cold, seconds


def test_a_launcher_a_candidate_built_is_built_again_in_trusted_code_and_planted_in_later_children(evaluator, relu):
    # #13: Triton 3.6 builds a C launcher per kernel signature at a kernel's first launch, in the child's private
    # cache: about 0.2 s of every candidate's first call. The parent builds it from the reported signature into the
    # seed that later children's caches are planted from.
    import os

    from triton.backends.nvidia import driver

    from services import sandbox
    from services.settings import EvalSettings

    if not hasattr(driver, "make_launcher"):
        pytest.skip("this Triton has one generic launcher")
    assert evaluator.evaluate(relu, unique(bundled_source("level1/1_ReLU")), NO_TIMING).result.verdict is Verdict.PASSED
    assert sandbox._SEED.path is not None

    def launchers(cache: str) -> set[str]:
        entries = [e for e in os.scandir(cache) if e.is_dir()]
        return {e.name for e in entries if any(f.startswith("__triton_launcher") for f in os.listdir(e.path))}

    deadline = time.monotonic() + 60
    while not launchers(sandbox._SEED.path) and time.monotonic() < deadline:
        time.sleep(0.2)
    seeded = launchers(sandbox._SEED.path)
    assert seeded
    later = sandbox.Child("cuda", EvalSettings())
    try:
        assert seeded <= launchers(os.path.join(later.tmpdir, sandbox.TRITON_CACHE))
    finally:
        later.close()


# A process that opens the parent's buffers as a child's hand-over does: one JSON list of descriptors per line,
# each filled with its index + 1; it answers with how many segment mappings it keeps. Its CUDA is up first, as a
# child's is before any job (torch's IPC opening assumes an initialised allocator).
_CONSUMER = """
import json, sys, torch
from services.protocol.tensors import open_cuda
torch.cuda.init()
torch.empty(1, device="cuda")
mapped = {}
for line in sys.stdin:
    for i, desc in enumerate(json.loads(line)):
        dst = open_cuda(desc, mapped)
        dst.fill_(i + 1)
        torch.cuda.synchronize()
        del dst
    print(len(mapped), flush=True)
"""


def test_a_child_maps_each_parent_segment_once_and_the_parent_reuses_its_buffers_after_each_hand_over(
    evaluator, tmp_path
):
    # #13: opening and closing a mapping takes the host's driver in turn with every other process's on any GPU
    # (7.8 ms instead of 0.28 beside four loops of children on the other GPU of an H200 host): a child keeps one
    # mapping per segment of small buffers. The keeper must not hold the parent's buffers: each is reused once its
    # view is gone.
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from services.protocol.tensors import SMALL_BUFFER_BYTES, share_cuda

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    errors = tmp_path / "consumer.err"
    with errors.open("w") as err:
        consumer = subprocess.Popen(
            [sys.executable, "-c", _CONSUMER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
    try:
        addresses = []
        for _ in range(2):
            with torch.cuda.use_mem_pool(evaluator.receive_pool("candidate")):
                bufs = [torch.zeros(256, device="cuda") for _ in range(2)]
            torch.cuda.synchronize()
            consumer.stdin.write(json.dumps([share_cuda(b, keep=True) for b in bufs]) + "\n")
            consumer.stdin.flush()
            answer = consumer.stdout.readline().strip()
            assert answer == "1", errors.read_text()  # both buffers in one segment, mapped once
            assert [b.unique().tolist() for b in bufs] == [[1.0], [2.0]]
            addresses.append([b.data_ptr() for b in bufs])
            del bufs
        assert addresses[0] == addresses[1]  # freed back to the pool, not held for the consumer
        # A large buffer has a segment of its own, shared by both roles: mapped for its copy only.
        with torch.cuda.use_mem_pool(evaluator.receive_pool("large")):
            big = torch.zeros(SMALL_BUFFER_BYTES // 4 + 1, device="cuda")
        consumer.stdin.write(json.dumps([share_cuda(big, keep=False)]) + "\n")
        consumer.stdin.flush()
        assert consumer.stdout.readline().strip() == "1", errors.read_text()
        assert big.unique().tolist() == [1.0]
        with torch.cuda.use_mem_pool(evaluator.receive_pool("reference")):
            ref = torch.zeros(256, device="cuda")
        with torch.cuda.use_mem_pool(evaluator.receive_pool("candidate")):
            cand = torch.zeros(256, device="cuda")
        # A candidate's mappings never cover a segment that holds the reference's tensors.
        assert share_cuda(ref, keep=True)["handle"] != share_cuda(cand, keep=True)["handle"]
    finally:
        consumer.stdin.close()
        consumer.wait(timeout=60)


def test_a_large_receive_buffer_comes_back_with_its_segment_once_nothing_holds_it(evaluator, tmp_path):
    # `keep_large_receive_buffers`: a role's large buffers are handed out again, so a child maps each segment once
    # instead of opening and closing a mapping per copy; one still held is never handed out twice.
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from services.parent.receive_arena import ReceiveArena
    from services.protocol.tensors import SMALL_BUFFER_BYTES, share_cuda

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    arena = ReceiveArena(evaluator.receive_pool("large candidate"))
    shape = [SMALL_BUFFER_BYTES // 4 + 1]
    with (tmp_path / "consumer.err").open("w") as err:
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": err}
        consumer = subprocess.Popen([sys.executable, "-c", _CONSUMER], **pipes, text=True, env=env)
    try:
        addresses = []
        for _ in range(3):
            buf = arena.take(torch.float32, shape)
            consumer.stdin.write(json.dumps([share_cuda(buf, keep=True)]) + "\n")
            consumer.stdin.flush()
            assert consumer.stdout.readline().strip() == "1", (tmp_path / "consumer.err").read_text()
            assert buf.unique().tolist() == [1.0]
            addresses.append(buf.data_ptr())
            del buf
        assert len(set(addresses)) == 1 and len(arena) == 1
        held = arena.take(torch.float32, shape)
        part = arena.take(torch.float32, shape)[1:]  # a derived view holds its buffer too
        assert len({held.data_ptr(), arena.take(torch.float32, shape).data_ptr(), part.data_ptr() - 4}) == 3
    finally:
        consumer.stdin.close()
        consumer.wait(timeout=60)


def test_an_evaluation_with_large_receive_buffers_kept_judges_as_without(tmp_path):
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    problem = Problem(id="relu_8mb", source=RELU_4GB.replace("16384, 65536", "1024, 2048"))
    settings = EvalSettings(correctness_trials=3, keep_large_receive_buffers=True)
    with Evaluator(settings) as ev:
        passed = ev.evaluate(problem, unique(bundled_source("level1/1_ReLU")), CUDA, MemoryTimingStore()).result
        wrong = ev.evaluate(problem, relu_candidate("return triton_relu(x) + 1"), NO_TIMING).result
    assert passed.verdict is Verdict.PASSED, passed.feedback
    assert wrong.verdict is Verdict.INCORRECT, wrong.feedback
