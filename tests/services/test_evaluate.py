"""End-to-end evaluations through real child processes: verdicts, feedback and isolation.

Runs on CPU (Triton interpreter) everywhere; `test_gpu.py` repeats the essentials on CUDA.
"""

from __future__ import annotations

import ast
import ctypes
import itertools
import os
import socket
import time

import pytest
import triton
from helpers import IN_PLACE_BODY, IN_PLACE_KERNEL, IN_PLACE_REFERENCE, bundled_source, relu_candidate, unique

from services.problems import Problem
from services.procfs import PR_GET_DUMPABLE
from services.schema import EvalOptions, Verdict

CPU = EvalOptions(device="cpu")
# Spelled so that static triage cannot see it: these tests exercise the dynamic path, as a hostile
# candidate that hides its imports would.
OS = "__import__('o' + 's')"
RUNTIME_LOOP_BOUNDS = {
    "level1/3_Sum_dim1",
    "level1/6_Matmul",
    "level2/1_Linear_Bias_ReLU",
    "level2/2_Linear_GELU_Scale_Residual",
}
NO_TIMING = EvalOptions(device="cpu", timing=False)


@pytest.mark.parametrize(
    "problem_id",
    [
        "level1/1_ReLU",
        "level1/2_GELU_tanh",
        "level1/3_Sum_dim1",
        "level1/4_Softmax_rows",
        "level1/5_RMSNorm",
        "level1/6_Matmul",
        "level1/7_Add_fp16",
        "level2/1_Linear_Bias_ReLU",
        "level2/2_Linear_GELU_Scale_Residual",
    ],
)
def test_honest_bundled_kernel_passes(evaluator, problems, problem_id):
    if problem_id in RUNTIME_LOOP_BOUNDS and tuple(map(int, triton.__version__.split(".")[:2])) < (3, 7):
        pytest.skip("the Triton 3.6 interpreter rejects runtime loop bounds (`range(0, K, BLOCK)`); CPU mode needs 3.7")
    result = evaluator.evaluate(problems.load(problem_id), bundled_source(problem_id), CPU).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert result.correct and result.compiled
    assert result.speedup is None and not result.timing_meaningful
    assert result.correctness.trials_passed == result.correctness.trials_run == 3
    assert all(c.passed for c in result.checks)
    assert {"outputs_match", "inputs_unchanged", "deterministic", "timed_output_recheck"} <= {
        c.name for c in result.checks
    }
    assert result.candidate_runtime.trials >= 3
    assert result.environment.device == "cpu"
    assert {"start", "load", "compile", "correctness", "timing", "total", "closing"} <= result.phases.keys()


def timed_over_placements(problem: Problem, options: EvalOptions, **settings: object) -> None:
    """The bundled ReLU, its inputs counted as large (threshold 0), with a timing store: each side's time is its
    fastest placement's median in the evaluation's own children, and no further reference process starts."""
    from services.evaluator import Evaluator
    from services.parent.timing import SPARE_PLACEMENTS
    from services.settings import EvalSettings
    from services.timing_cache import MemoryTimingStore

    chosen = EvalSettings(correctness_trials=1, warm_children=1, placement_min_mb=0, **settings)
    with Evaluator(chosen) as ev:
        source = unique(bundled_source("level1/1_ReLU"))
        result, diagnostics = ev.evaluate(problem, source, options, MemoryTimingStore())
    assert result.verdict is Verdict.PASSED, result.feedback
    for name, side in (("candidate", result.candidate_runtime), ("reference", result.reference_runtime)):
        # A spare placement follows a slow one (more than 5% over the fastest median).
        assert chosen.timing_placements <= side.processes <= chosen.timing_placements + SPARE_PLACEMENTS, side
        assert side.processes == len(side.process_medians_ms) and side.median_ms == min(side.process_medians_ms)
        # When each placement's calls ran, in turn, with its median: for a bench to set beside the host's work.
        windows = [w for w in diagnostics.placement_windows if w[0] == name]
        assert [w[3] for w in windows] == side.process_medians_ms
        assert all(a[1] <= a[2] <= b[1] for a, b in itertools.pairwise(windows)) and windows[-1][1] <= windows[-1][2]
    assert "timing_reference_processes" not in result.phases
    # The GPU children that started meanwhile, recorded on the same clock (CPU children are not)
    assert any(kind == "start" for kind, *_ in diagnostics.child_events) == (options.device == "cuda")


def test_large_inputs_are_timed_over_several_placements_of_them_and_no_further_reference_process(relu):
    # On a GPU each placement moves the inputs to other pages (a memory-bound kernel's time depends on them,
    # test_gpu.py); on CPU nothing moves, but the calls are grouped and pooled the same way.
    timed_over_placements(relu, CPU)


def test_phases_split_the_devices_hold_and_what_the_start_waited_for_and_report_the_first_call(evaluator, relu):
    # #13: a measurement's hold is what every other evaluation on the GPU waits through, the first call is the
    # longest request a measurement waits for, and `start` is to take 0.1 s at steady state; each part is
    # reported so that a GPU run shows where they go.
    result = evaluator.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU).result
    phases = result.phases
    parts = {"timing_warm_up", "timing_revalidation", "timing_sampling", "timing_checks", "timing_rechecks"}
    assert parts <= phases.keys() and all(phases[p] >= 0 for p in parts)
    assert phases["timing_sampling"] > 0 and sum(phases[p] for p in parts) <= phases["timing"]
    assert 0 < phases["first_call"] <= phases["compile"] + phases["correctness"]
    assert 0 <= phases["start_ready_wait"] + phases["start_drain"] <= phases["start"]


def test_a_timed_evaluation_releases_once_per_stage_and_re_checks_in_three_requests(evaluator, relu):
    # On a shared GPU every request waits for its turn while another evaluation measures. A child's next Call
    # drops what it kept anyway, so releases between trials and between re-checks were requests for nothing; the
    # re-checks take the reference's outputs for every seed in one request, the candidate's retained copies in
    # another and its last output in a third, where they took two requests a call.
    evaluation = evaluator.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU)
    result = evaluation.result
    assert result.verdict is Verdict.PASSED
    sent = {kind: tally["n"] for kind, tally in evaluation.diagnostics.requests.items()}
    assert sent["reference.release"] <= 4 and sent["candidate.release"] <= 4, sent
    assert sent["reference.recompute"] == 1 and sent["reference.call"] == sent["candidate.call"] == 4, sent
    # 3 trials, then the retained copies in one, the last output, the output-dependence check's output
    assert sent["reference.deliver"] <= 2 and sent["candidate.deliver"] <= 3 + 3, sent


def test_a_timed_calls_time_in_its_child_is_split_by_part_for_the_workers_log(evaluator, relu):
    # At published sizes a timed request costs far more than its kernel: the child says how much went to a new
    # placement, the fresh inputs, the call and the late digest, summed per side beside the request's own time.
    requests = evaluator.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU).diagnostics.requests
    for role in ("reference", "candidate"):
        parts = [requests[f"{role}.time_{part}"] for part in ("placement", "inputs", "call", "digest")]
        assert all(p["n"] == requests[f"{role}.time"]["n"] > 0 and p["s"] >= 0 for p in parts), requests
        assert parts[2]["s"] > 0 and sum(p["s"] for p in parts) <= requests[f"{role}.time"]["s"], requests


def test_correctness_trials_take_each_childs_tensors_in_one_request_and_the_references_with_its_call(evaluator, relu):
    # Three trials of small tensors: each child's inputs and output (and the candidate's repeat) in one delivery,
    # after the first trial the reference's with its call's reply; the output-dependence check's output besides.
    # A candidate's call never carries the parent's buffers: its code runs during it.
    evaluation = evaluator.evaluate(relu, unique(bundled_source("level1/1_ReLU")), NO_TIMING)
    result = evaluation.result
    assert result.verdict is Verdict.PASSED and result.correctness.trials_passed == 3
    sent = {kind: tally["n"] for kind, tally in evaluation.diagnostics.requests.items()}
    assert sent["reference.call"] == sent["candidate.call"] == 4, sent
    assert sent["reference.deliver"] <= 2 and sent["candidate.deliver"] <= 4, sent


def test_wrong_values_are_incorrect_with_mismatch_feedback(evaluator, relu):
    result = evaluator.evaluate(relu, relu_candidate("return triton_relu(x) + 1e-2"), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT
    assert not result.correct and result.compiled
    assert "differ" in result.feedback and "trial 1/3" in result.feedback
    assert result.correctness.mismatched_elements > 0
    assert result.correctness.max_abs_error == pytest.approx(1e-2, rel=1e-3)
    # The stage that ended it has its time, as a completed one has (a KernelBench step's failures showed none).
    assert 0 < result.phases["correctness"] <= result.phases["total"] and result.phases["closing"] >= 0


def test_a_wrong_outputs_buffers_go_back_within_the_turn_that_compared_it(evaluator, relu, monkeypatch):
    # Giving device memory back waits for a turn of the slot (another evaluation's measurement first): the
    # evaluation a wrong output ends gives its buffers back in the turn it already holds, and its close finds
    # nothing left to give back.
    import torch

    from services.evaluator import Evaluator

    given: list[bool | None] = []
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda: 0 if given else 1 << 30)  # held until given back

    def give_back(self: Evaluator) -> None:  # whether the evaluation's link holds a turn, None once it is gone
        given.append(getattr(self._current, "_in_turn", None))

    monkeypatch.setattr(Evaluator, "_give_back_receive_buffers", give_back)
    result = evaluator.evaluate(relu, relu_candidate("return triton_relu(x) + 1e-2"), NO_TIMING).result
    # In the comparing turn; at the close, after the evaluation's link is gone, with nothing left and no turn.
    assert result.verdict is Verdict.INCORRECT and given == [True, None], given


def test_wrong_shape_is_incorrect(evaluator, relu):
    result = evaluator.evaluate(relu, relu_candidate("return triton_relu(x)[:, :10]"), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT
    assert "shape" in result.feedback


def test_wrong_dtype_is_incorrect(evaluator, relu):
    result = evaluator.evaluate(relu, relu_candidate("return triton_relu(x).double()"), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT
    assert "dtype" in result.feedback


def test_nan_in_wrong_place_is_incorrect(evaluator, relu):
    body = "y = triton_relu(x)\ny[0, 0] = float('nan')\nreturn y"
    result = evaluator.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT
    assert "NaN/Inf" in result.feedback


def test_syntax_error_is_compile_error_before_any_child_or_device_memory(evaluator, relu):
    # Unparsable samples are common in RL rollouts: they waited for device memory and two children to hear it.
    result, diagnostics = evaluator.evaluate(relu, "import torch\nclass ModelNew(:\n    pass\n", NO_TIMING)
    assert result.verdict is Verdict.COMPILE_ERROR
    assert not result.compiled
    assert "SyntaxError" in result.feedback and 'File "kg_candidate.py", line 2' in result.feedback
    assert "start" not in result.phases and diagnostics.requests == {}


def test_missing_model_new_is_compile_error_before_any_child(evaluator, relu):
    # RL answers often name the class otherwise: their load waited for both children to say so.
    result, diagnostics = evaluator.evaluate(relu, "import torch\nclass Model(torch.nn.Module):\n    pass\n", NO_TIMING)
    assert result.verdict is Verdict.COMPILE_ERROR
    assert "defines no class `ModelNew`" in result.feedback
    assert "start" not in result.phases and diagnostics.requests == {}


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("import torch\nclass Model(torch.nn.Module):\n    pass\n", True),
        ("import torch.nn as nn\nclass Fast(nn.Module):\n    def forward(self, x):\n        return x\n", True),
        ("x = 1\n", True),
        ("class ModelNew:\n    pass\n", False),
        ("Fast = object\nModelNew = Fast\n", False),
        ("# ModelNew is below\nclass Other:\n    pass\n", False),  # spelled, if only in a comment: the load decides
        ("class Other:\n    pass\nglobals()['Model' + 'New'] = Other\n", False),
        ("import sys\nclass Other:\n    pass\nsys.modules[__name__].__dict__['M' + 'odelNew'] = Other\n", False),
        ("class Other:\n    pass\nexec('Model' + 'New = Other')\n", False),
        ("from helpers import *\n", False),
        ("from sys import modules\nmodules[__name__].Fast = 1\n", False),
        ("def __getattr__(name):\n    return object\n", False),
        ("import inspect\ninspect.currentframe().f_globals['Model' + 'New'] = int\n", False),
        ("class \uff2dodelNew:\n    pass\n", False),  # fullwidth M: the parser's NFKC makes it ModelNew
        ("X = type('Model\\x4eew', (), {})\n", False),  # the name in a string, escaped: left to the load
        ("import pickle\npickle.loads(b'...Model\\x4eew...')\n", False),  # escaped in bytes: left to the load
    ],
)
def test_only_a_source_that_cannot_bind_model_new_is_refused_before_its_load(source, refused):
    from services.errors import EarlyVerdict
    from services.parent.load import refuse_without_model_new

    tree = ast.parse(source)
    if refused:
        with pytest.raises(EarlyVerdict) as caught:
            refuse_without_model_new(source, tree)
        assert caught.value.verdict is Verdict.COMPILE_ERROR
    else:
        refuse_without_model_new(source, tree)


def test_triton_compile_failure_is_compile_error(evaluator, relu):
    extra = """
@triton.jit
def _bad(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + undefined_name, mask=offs < n)
"""
    body = "_bad[(1,)](x, x.numel(), BLOCK=128)\nreturn triton_relu(x)"
    result = evaluator.evaluate(relu, relu_candidate(body, extra), NO_TIMING).result
    assert result.verdict in (Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR)
    assert "undefined_name" in result.feedback


def test_exception_in_forward_is_runtime_error_with_traceback(evaluator, relu):
    result = evaluator.evaluate(relu, relu_candidate("raise ValueError('boom from forward')"), NO_TIMING).result
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "boom from forward" in result.feedback
    assert "kg_candidate.py" in result.feedback  # the candidate's own frame, not the harness's


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (f"{OS}.kill({OS}.getpid(), 11)", "SIGSEGV"),
        (f"{OS}.abort()", "SIGABRT"),
        (f"{OS}._exit(0)", "status 0"),
        (f"{OS}._exit(3)", "status 3"),
        ("__import__('ct' + 'ypes').string_at(0)", "SIGSEGV"),
    ],
    ids=["segfault", "abort", "os_exit_0", "os_exit_3", "null_deref"],
)
def test_process_death_is_crashed_and_next_evaluation_unaffected(evaluator, relu, body, expect):
    result = evaluator.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict is Verdict.CRASHED
    assert expect in result.feedback
    after = evaluator.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).result
    assert after.verdict is Verdict.PASSED


def test_crash_at_import_time_is_crashed(evaluator, relu):
    # "ModelNew" spelled, not defined: past the parent's refusal of sources without it, to the child's import.
    result = evaluator.evaluate(relu, "import os\nos._exit(0)  # before ModelNew\n", NO_TIMING).result
    assert result.verdict is Verdict.CRASHED
    assert "importing" in result.feedback


def test_infinite_loop_times_out_within_the_phase_limit(strict_timeouts, relu):
    start = time.monotonic()
    result = strict_timeouts.evaluate(relu, relu_candidate("while True:\n    pass"), NO_TIMING).result
    elapsed = time.monotonic() - start
    assert result.verdict is Verdict.TIMEOUT
    assert "Timed out" in result.feedback
    # The load and correctness budgets bound the time after the children started (starting them is slow on a
    # loaded two-core machine and is not what this test is about).
    assert elapsed - result.phases["start"] < 20 + 4 + 5


def test_huge_allocation_fails_cleanly(strict_timeouts, relu):
    body = "junk = torch.empty(1 << 42, dtype=torch.uint8)\njunk.fill_(1)\nreturn triton_relu(x)"
    result = strict_timeouts.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict in (Verdict.RUNTIME_ERROR, Verdict.CRASHED)
    assert result.verdict is not Verdict.PASSED


def test_memory_hog_is_killed_by_the_watchdog(relu):
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    body = "hog = [torch.ones(1 << 20) for _ in range(4000)]\nreturn triton_relu(x)"
    with Evaluator(EvalSettings(memory_limit_mb=2048, correctness_trials=1, warm_children=0)) as ev:
        result = ev.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict in (Verdict.CRASHED, Verdict.RUNTIME_ERROR)


@pytest.mark.parametrize(
    ("late", "expect"),
    [("x.zero_()", "modified its input"), ("y = y[:-1]", "Wrong output on correctness trial 2")],
)
def test_a_candidate_that_goes_wrong_after_its_first_trial_is_incorrect(evaluator, relu, late, expect):
    # From the second trial on, the reference's tensors come with its call's reply and the candidate's in one
    # delivery: the checks are the same.
    body = f"CALLS[0] += 1\ny = triton_relu(x)\nif CALLS[0] > 2:  # the first trial calls twice\n    {late}\nreturn y"
    result = evaluator.evaluate(relu, relu_candidate(body, "CALLS = [0]\n"), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT, result.feedback
    assert expect in result.feedback


def test_mutating_inputs_is_incorrect(evaluator, relu):
    result = evaluator.evaluate(relu, relu_candidate("y = triton_relu(x)\nx.zero_()\nreturn y"), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT
    assert "modified its input" in result.feedback
    assert any(c.name == "inputs_unchanged" and not c.passed for c in result.checks)


def test_large_inputs_are_checked_unchanged_by_their_digests(relu):
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    # Every input counts as large here: the children digest them, and the parent receives none. An in-place
    # reference's inputs are still compared within the tolerance, in the parent.
    with Evaluator(EvalSettings(digest_inputs_mb=0, correctness_trials=2, warm_children=0)) as ev:
        honest = ev.evaluate(relu, bundled_source("level1/1_ReLU"), NO_TIMING).result
        mutating = ev.evaluate(relu, relu_candidate("y = triton_relu(x)\nx.zero_()\nreturn y"), NO_TIMING).result
        problem = Problem(id="inplace", source=IN_PLACE_REFERENCE.format(op="x.add_(1.0)"))
        in_place = ev.evaluate(
            problem, relu_candidate(IN_PLACE_BODY, IN_PLACE_KERNEL.format(expr="x + 1.0")), NO_TIMING
        )
    assert honest.verdict is Verdict.PASSED, honest.feedback
    assert any(c.name == "inputs_unchanged" and c.passed and "by digest" in c.detail for c in honest.checks)
    assert mutating.verdict is Verdict.INCORRECT and "modified its input" in mutating.feedback
    assert in_place.result.verdict is Verdict.PASSED, in_place.result.feedback
    assert any(c.name == "inputs_unchanged" and "in-place" in c.detail for c in in_place.result.checks)


@pytest.mark.parametrize(
    ("op", "expr"),
    [("x.add_(1.0)", "x + 1.0"), ("x.clamp_(min=0.0)", "tl.where(x < 0.0, 0.0, x)")],
    ids=["non_idempotent", "idempotent"],
)
def test_faithful_in_place_candidate_passes(evaluator, op, expr):
    problem = Problem(id="inplace", source=IN_PLACE_REFERENCE.format(op=op))
    result = evaluator.evaluate(
        problem, relu_candidate(IN_PLACE_BODY, IN_PLACE_KERNEL.format(expr=expr)), NO_TIMING
    ).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert any(c.name == "inputs_unchanged" and c.passed and "in-place" in c.detail for c in result.checks)
    assert any(c.name == "deterministic" and c.passed for c in result.checks)


def test_candidate_that_skips_the_references_in_place_update_is_incorrect(evaluator):
    problem = Problem(id="inplace", source=IN_PLACE_REFERENCE.format(op="x.add_(1.0)"))
    body = "out = torch.empty_like(x)\n_add[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)\nreturn out"
    extra = """
@triton.jit
def _add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)
"""
    result = evaluator.evaluate(problem, relu_candidate(body, extra), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT
    assert any(c.name == "inputs_unchanged" and not c.passed for c in result.checks)


def test_reading_uninitialised_memory_is_caught_by_the_repeat_call(evaluator, relu):
    # Writes only the first half of the output: the rest is whatever the allocator handed out.
    extra = """
@triton.jit
def _half(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n // 2
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)
"""
    body = (
        "out = torch.empty_like(x)\n_half[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)\nreturn out"
    )
    result = evaluator.evaluate(relu, relu_candidate(body, extra), NO_TIMING).result
    assert result.verdict is Verdict.INCORRECT


def test_result_cache_across_calls_is_rejected(evaluator, relu):
    # Answers every call after the first with the first call's output, launching nothing: caught by the
    # launch rule on the repeat call (and, were it to launch a decoy, by the fresh-input comparisons).
    extra = "_CACHE = {}\n"
    body = """
key = tuple(x.shape)
if key not in _CACHE:
    _CACHE[key] = triton_relu(x)
return _CACHE[key]
"""
    result = evaluator.evaluate(relu, relu_candidate(body, extra), CPU).result
    assert result.verdict is Verdict.REJECTED
    assert not result.correct and result.speedup is None
    assert any(c.name == "custom_kernel_launched" and not c.passed for c in result.checks)


def test_a_timed_output_mended_after_its_call_is_rejected(relu):
    # Timed calls return noise, and each later call finds the harness's copies of earlier outputs chosen for a
    # re-check and overwrites them with the right values: the comparison after the measurement would pass, the
    # digest each call reported does not. Every kept call is chosen (recheck_fraction=1), so copies exist.
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    extra = """
import gc
import sys
_ANSWERED = []  # (input, noise returned for it)

def _timed():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "time_call":
            return True
        frame = frame.f_back
    return False
"""
    body = """
out = triton_relu(x)
if not _timed():
    return out
for obj in gc.get_objects():
    if type(obj).__name__ == "Runtime":
        for copies in obj.retained:
            for t in copies:
                for seen, noise in _ANSWERED:
                    if t.shape == noise.shape and torch.equal(t, noise):
                        t.copy_(triton_relu(seen))
noise = torch.rand_like(x)
_ANSWERED.append((x.clone(), noise.clone()))
return noise
"""
    with Evaluator(EvalSettings(correctness_trials=1, warm_children=1, recheck_fraction=1.0)) as ev:
        result = ev.evaluate(relu, relu_candidate(body, extra), CPU).result
    assert result.verdict is Verdict.REJECTED
    recheck = [c for c in result.checks if c.name == "timed_output_recheck"]
    assert not recheck[0].passed and "changed after the call returned" in recheck[0].detail


def test_secrets_are_not_in_the_child_environment(evaluator, relu, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("KERNELGYM_REDIS_URL", "redis://secret@host")
    # The candidate is only correct if it sees neither variable.
    body = """
import os
leaked = any(k in os.environ for k in ("OPENAI_API_KEY", "KERNELGYM_REDIS_URL"))
return triton_relu(x) + (1.0 if leaked else 0.0)
"""
    result = evaluator.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback


def test_child_runs_in_a_private_directory(evaluator, relu):
    body = """
import os, tempfile
private = os.getcwd() == os.environ["HOME"] == tempfile.gettempdir() and "kernelgym-" in os.getcwd()
return triton_relu(x) + (0.0 if private else 1.0)
"""
    result = evaluator.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback


def test_child_reaches_no_network_without_the_audit_guard(undefended, relu):
    """The namespace or the socket filter alone, without the audit guard that would also refuse the socket."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    body = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
    reached = True
except OSError:
    reached = False
return triton_relu(x) + (1.0 if reached else 0.0)
"""
    try:
        result = undefended.evaluate(relu, relu_candidate(body), NO_TIMING).result
    finally:
        server.close()
    isolation = result.environment.network_isolation
    if not isolation.startswith(("netns", "userns")) and "sockets: local sockets only" not in isolation:
        pytest.skip(f"neither a network namespace nor seccomp on this machine: {isolation}")
    assert result.verdict is Verdict.PASSED, result.feedback


@pytest.mark.skipif(os.geteuid() != 0, reason="a child of a worker that is not root holds no capability")
def test_a_root_workers_child_runs_a_request_without_capabilities(undefended, relu):
    body = """
with open("/proc/self/status") as f:
    caps = {k: int(v, 16) for k, v in (line.split(":") for line in f if line.startswith("Cap"))}
return triton_relu(x) + (0.0 if not any(caps.values()) else 1.0)
"""
    result = undefended.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert "capabilities: dropped" in result.environment.containment
    assert result.verdict is Verdict.PASSED, result.feedback


def test_neither_a_child_nor_the_process_that_runs_it_lets_others_of_its_user_read_its_memory(undefended, relu):
    # Undumpable (services.procfs.undumpable): where no Landlock domain or user namespace stands between them, a
    # candidate would otherwise read its evaluator's nonce and the reference's outputs in /proc/<pid>/mem.
    body = """
import ctypes
dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
return triton_relu(x) + (0.0 if dumpable == 0 else 1.0)
"""
    result = undefended.evaluate(relu, relu_candidate(body), NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0  # this process, whose pool started the children


def test_reference_given_as_source_and_problem_name(evaluator, relu):
    from services.problems import Problem

    problem = Problem(id="my_relu", source=relu.source)
    result = evaluator.evaluate(problem, bundled_source("level1/1_ReLU"), NO_TIMING).result
    assert result.verdict is Verdict.PASSED
    assert result.problem == "my_relu"


def test_broken_reference_raises_reference_failed(evaluator):
    from services.errors import ReferenceFailed

    source = (
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        raise RuntimeError('ref')\n"
        "def get_inputs():\n    return [torch.ones(3)]\ndef get_init_inputs():\n    return []\n"
    )
    with pytest.raises(ReferenceFailed, match="ref"):
        evaluator.evaluate(Problem(id="broken", source=source), bundled_source("level1/1_ReLU"), NO_TIMING)


def test_both_models_load_side_by_side(evaluator, relu):
    # The reference's Model takes 1.5 s to construct, in its child only; the candidate's module 1.5 s to import, in
    # its child only (the candidate's child imports the reference's module too): one load after the other would take
    # 3 s or more.
    slow_model = (
        "\nimport time as _t\n_init = Model.__init__\n"
        "def _slow_init(self, *args):\n    _t.sleep(1.5)\n    _init(self, *args)\n"
        "Model.__init__ = _slow_init\n"
    )
    problem = Problem(id="slow_relu", source=relu.source + slow_model)
    candidate = unique(bundled_source("level1/1_ReLU")) + "\nimport time as _t\n_t.sleep(1.5)\n"
    result = evaluator.evaluate(problem, candidate, NO_TIMING).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert 1.5 <= result.phases["load"] < 2.7


def test_a_reference_that_fails_to_load_is_the_references_fault_whatever_the_candidate_did(evaluator, relu):
    from services.errors import ReferenceFailed

    problem = Problem(id="broken_load", source=relu.source + "\nraise RuntimeError('ref at import')\n")
    candidate = unique(bundled_source("level1/1_ReLU")) + "\nraise RuntimeError('candidate at import')\n"
    with pytest.raises(ReferenceFailed, match="ref at import"):
        evaluator.evaluate(problem, candidate, NO_TIMING)


def test_problem_footprints_are_shared_by_reference_source_and_only_the_latest_kept(tmp_path):
    import os

    from services.device_memory import Footprints

    mine, other_process = Footprints(tmp_path / "gpu.footprints", most=2), Footprints(tmp_path / "gpu.footprints")
    a, b, c = (Problem(f"p{i}", f"# reference {i}\n") for i in range(3))
    assert mine.get(a) is None
    mine.set(a, 12)
    assert other_process.get(a) == 12 and mine.get(Problem("renamed", a.source)) == 12 and mine.get(b) is None
    mine.set(b, 3)
    os.utime(mine._file(b), (1, 1))  # b is the oldest
    mine.set(c, 32)
    assert mine.get(a) == 12 and mine.get(c) == 32 and other_process.get(b) is None


def test_a_problems_memory_need_counts_both_childrens_tensors_and_the_parents_copies():
    from services.device_lock import MEMORY_UNITS
    from services.device_memory import CHILD_OVERHEAD_BYTES, footprint_bytes, units

    gb = 1 << 30
    # The reference's inputs and output, the candidate's inputs and two outputs, the parent's two outputs, and the
    # contexts of both children and a timing process.
    assert footprint_bytes(gb, 2 * gb) == 2 * gb + 5 * 2 * gb + 3 * CHILD_OVERHEAD_BYTES
    h100 = 80 * gb
    assert units(0, h100) == 1
    assert units(footprint_bytes(4 << 20, 4 << 20), h100) == 2  # a bundled problem: the contexts
    # KernelBench level1/19_ReLU at its published sizes (6.4 GB in, as much out): two of them never share an H100.
    assert units(footprint_bytes(6_442_450_944, 6_442_450_944), h100) > MEMORY_UNITS // 2
    assert units(footprint_bytes(64 * gb, 64 * gb), h100) == MEMORY_UNITS


def test_a_new_references_further_processes_need_less_of_the_device_than_its_evaluation():
    from services.device_memory import CHILD_OVERHEAD_BYTES, footprint_bytes, further_processes_bytes, units

    gb = 1 << 30
    # One further process's inputs and output, as much again for intermediates, and in it and the evaluation's own
    # reference child a context and the loaded model each.
    assert further_processes_bytes(gb, 2 * gb, gb // 4) == 6 * gb + 2 * (gb // 4 + CHILD_OVERHEAD_BYTES)
    # Two loaded side by side: the tensors of each, and a context and a model in each and in the evaluation's own.
    assert further_processes_bytes(gb, 2 * gb, gb // 4, 2) == 12 * gb + 3 * (gb // 4 + CHILD_OVERHEAD_BYTES)
    # level1/19_ReLU at its published sizes (20 units, 12 for these): what the evaluation gives back lets another
    # of its problem in beside.
    relu, h100 = 6_442_450_944, 80 * gb
    assert units(further_processes_bytes(relu, relu, 0), h100) + units(footprint_bytes(relu, relu), h100) <= 32


def test_a_timed_output_of_another_shape_is_rejected_before_the_parent_receives_it(evaluator, relu):
    # The parent sizes its buffers by the reference's output, never by a candidate's claim: one that claimed a
    # huge output would run the parent out of device memory, which counts against the problem.
    body = "global CALLS\nCALLS += 1\nout = triton_relu(x)\nreturn torch.cat([out, out]) if CALLS > 8 else out"
    result = evaluator.evaluate(relu, unique(relu_candidate(body, "CALLS = 0\n")), CPU).result
    assert result.verdict is Verdict.REJECTED
    failed = [c for c in result.checks if not c.passed]
    assert [c.name for c in failed] == ["timed_output_recheck"] and "(128, 1000)" in failed[0].detail, failed


def test_re_checks_go_one_by_one_where_the_references_output_changes_shape_with_the_seed(evaluator, relu):
    # The batched re-check sizes its buffers by the reference's first output; where get_inputs() draws its sizes,
    # the outputs differ from it and each call is re-checked on its own, and an honest candidate still passes.
    # Both sides are drawn from 64 values each, so that two re-checked calls share a shape once in 4,096 runs.
    source = relu.source.replace(
        'def get_inputs():\n    return [torch.randn(rows, cols, device="cuda")]',
        "def get_inputs():\n    import random\n"
        '    return [torch.randn(rows + random.randrange(64), cols + random.randrange(64), device="cuda")]',
    )
    assert source != relu.source
    evaluation = evaluator.evaluate(
        Problem("level1/relu_rows_drawn", source), unique(bundled_source("level1/1_ReLU")), CPU
    )
    result = evaluation.result
    assert result.verdict is Verdict.PASSED, result.feedback
    sent = {kind: tally["n"] for kind, tally in evaluation.diagnostics.requests.items()}
    assert sent["reference.recompute"] == 1 and sent["reference.call"] > sent["candidate.call"], sent
