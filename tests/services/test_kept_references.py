"""A problem's reference child serves its next candidates: fewer child starts and ends, the host driver's
serialised work (services.parent.references), with the same verdicts and never a kept candidate child."""

from __future__ import annotations

import os
import time

import pytest
from helpers import bundled_source

from services.errors import ChildDied
from services.evaluator import Evaluator
from services.parent import references
from services.protocol.messages import Job, Load, command_header
from services.sandbox import Child
from services.schema import EvalOptions
from services.settings import EvalSettings

RELU, GELU = "level1/1_ReLU", "level1/2_GELU_tanh"
OPTIONS = EvalOptions(device="cpu", timing=False)


@pytest.fixture(scope="module")
def keeping() -> Evaluator:
    with Evaluator(EvalSettings(correctness_trials=2, warm_children=2, reference_children_kept=1)) as ev:
        yield ev


def _kept_pids(ev: Evaluator) -> list[int]:
    return [child.proc.pid for child in ev.references._idle.values()]


def test_the_next_candidate_of_a_problem_reuses_its_reference_child_and_never_a_candidate_child(keeping, problems):
    relu = problems.load(RELU)
    first = keeping.evaluate(relu, bundled_source(RELU), OPTIONS).result
    kept = _kept_pids(keeping)
    second = keeping.evaluate(relu, bundled_source(RELU), OPTIONS)
    assert [first.verdict.value, second.result.verdict.value] == ["passed", "passed"]
    assert [second.diagnostics.reference_kept, len(kept)] == [True, 1]
    assert _kept_pids(keeping) == kept  # the same process served both, and is kept again
    # A wrong candidate fails against the reused reference as against a fresh one.
    wrong = keeping.evaluate(relu, bundled_source(RELU).replace("y = tl.where(x < 0.0, 0.0, x)", "y = x"), OPTIONS)
    assert wrong.result.verdict.value == "incorrect" and wrong.diagnostics.reference_kept


def test_another_problem_takes_a_fresh_reference_child_and_the_least_recent_one_is_closed(keeping, problems):
    keeping.evaluate(problems.load(RELU), bundled_source(RELU), OPTIONS)
    relu_child = next(iter(keeping.references._idle.values()))
    evaluation = keeping.evaluate(problems.load(GELU), bundled_source(GELU), OPTIONS)
    assert evaluation.result.verdict.value == "passed" and not evaluation.diagnostics.reference_kept
    assert relu_child.proc.pid not in _kept_pids(keeping)  # at most one kept: ReLU's went
    assert relu_child.proc.wait(timeout=30) is not None


def test_a_kept_reference_child_killed_while_idle_gives_way_to_a_fresh_one(keeping, problems):
    relu = problems.load(RELU)
    keeping.evaluate(relu, bundled_source(RELU), OPTIONS)
    child = next(iter(keeping.references._idle.values()))
    child.kill()  # any process of the worker's user can do this between evaluations
    child.proc.wait(timeout=30)
    evaluation = keeping.evaluate(relu, bundled_source(RELU), OPTIONS)
    assert evaluation.result.verdict.value == "passed" and not evaluation.diagnostics.reference_kept


def test_a_reference_is_still_kept_after_its_candidate_failed(keeping, problems):
    relu = problems.load(RELU)
    failing = bundled_source(RELU).replace("x = x.contiguous()", "raise RuntimeError('no')")
    assert failing != bundled_source(RELU)
    result = keeping.evaluate(relu, failing, OPTIONS).result
    assert result.verdict.value == "runtime_error"
    evaluation = keeping.evaluate(relu, bundled_source(RELU), OPTIONS)
    assert evaluation.result.verdict.value == "passed" and evaluation.diagnostics.reference_kept


def test_a_reference_whose_tensors_passed_the_keep_limit_is_not_kept(keeping, problems, monkeypatch):
    relu = problems.load(RELU)
    keeping.references.close()
    monkeypatch.setattr(keeping, "settings", keeping.settings.model_copy(update={"reference_keep_max_mb": 0}))
    first = keeping.evaluate(relu, bundled_source(RELU), OPTIONS)
    second = keeping.evaluate(relu, bundled_source(RELU), OPTIONS)
    assert [first.result.verdict.value, second.result.verdict.value] == ["passed", "passed"]
    assert not second.diagnostics.reference_kept and _kept_pids(keeping) == []


def test_a_reference_that_leaves_a_thread_running_is_not_kept(keeping, problems):
    """Its thread would go on beside other evaluations while the child idles."""
    from services.problems import Problem

    relu = problems.load(RELU)
    keeping.references.close()
    # Started by its forward, which only the reference's child runs (a candidate's child imports the problem too).
    lingering = """
import threading, time
_forward = Model.forward
def _forward_leaving_a_thread(self, *args):
    if not getattr(Model, "started", False):
        Model.started = True
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    return _forward(self, *args)
Model.forward = _forward_leaving_a_thread
"""
    problem = Problem(id="relu_with_a_thread", source=relu.source + lingering)
    first = keeping.evaluate(problem, bundled_source(RELU), OPTIONS)
    second = keeping.evaluate(problem, bundled_source(RELU), OPTIONS)
    assert [first.result.verdict.value, second.result.verdict.value] == ["passed", "passed"], first.result.feedback
    assert not second.diagnostics.reference_kept and _kept_pids(keeping) == []
    assert keeping.evaluate(relu, bundled_source(RELU), OPTIONS).result.verdict.value == "passed"
    assert _kept_pids(keeping)  # the problem's own reference is kept as before


def _job(role: str, reference: str, candidate: str | None = None) -> dict:
    job = Job(
        nonce="n" * 32,
        role=role,
        device="cpu",
        reference_source=reference,
        candidate_source=candidate,
        init_seed=1,
        l2_flush_factor=0.0,
        defences=True,
    )
    return command_header(job)


@pytest.mark.parametrize("second", ["candidate", "another problem"])
def test_a_child_refuses_a_second_job_other_than_its_own_problems_reference(problems, second):
    relu, gelu = problems.load(RELU).source, problems.load(GELU).source
    child = Child("cpu", EvalSettings())
    try:
        deadline = time.monotonic() + 120
        child.start_job(_job("reference", relu), deadline)
        child.request(command_header(Load()), deadline)
        assert child.idle()
        nxt = _job("candidate", relu, bundled_source(RELU)) if second == "candidate" else _job("reference", gelu)
        child.start_job(nxt, deadline)
        with pytest.raises(ChildDied):
            child.request(command_header(Load()), deadline)
    finally:
        child.close()


@pytest.mark.parametrize("fork", [True, False])
def test_no_child_searches_a_directory_a_candidate_can_write_for_modules(problems, fork, monkeypatch):
    # A kept reference child imports its source again for each job, and any module that source imports late: a
    # module planted in its directory, or the zygote's, by a candidate of the same user would then run in it. An
    # empty or relative entry of the worker's PYTHONPATH would name the child's directory too.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", ".", os.environ.get("PYTHONPATH", "")]))
    relu = problems.load(RELU)
    probe = (
        "\nimport os as _os, sys as _sys\n"
        "def _here(p):\n"
        "    return p == '' or _os.path.isdir(p) and _os.path.samefile(p, '.') or 'kernelgym-zygote-' in p\n"
        "if any(_here(p) for p in _sys.path):\n"
        "    raise RuntimeError(f'a writable directory on the search path: {_sys.path}')\n"
    )
    problem = type(relu)(id=relu.id, source=relu.source + probe)
    with Evaluator(EvalSettings(correctness_trials=1, warm_children=0, fork_children=fork)) as ev:
        assert ev.evaluate(problem, bundled_source(RELU), OPTIONS).result.verdict.value == "passed"


def test_a_reference_child_that_served_its_most_jobs_is_closed_rather_than_kept(keeping, problems, monkeypatch):
    monkeypatch.setattr(references, "MOST_JOBS", 2)
    relu = problems.load(RELU)
    keeping.references.close()
    pids = []
    for _ in range(3):
        evaluation = keeping.evaluate(relu, bundled_source(RELU), OPTIONS)
        assert evaluation.result.verdict.value == "passed"
        pids.append(_kept_pids(keeping))
    # The first child served the first two (its second job its last, so it was closed); the third took a fresh one.
    assert pids[0] != [] and pids[1] == [] and pids[2] not in ([], pids[0])
    assert evaluation.diagnostics.reference_kept is False
