"""The request/result contract: validation rules and JSON round trips."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from services.schema import (
    MAX_SOURCE_BYTES,
    PROTOCOL_VERSION,
    Check,
    CorrectnessSummary,
    Environment,
    EvalOptions,
    EvalRequest,
    EvalResult,
    RuntimeStats,
    Verdict,
)

ONE_REFERENCE = re.escape("give exactly one of `reference` (source) or `problem_id`")


def _stats(**over) -> RuntimeStats:
    values = dict(
        median_ms=1.5,
        iqr_ms=0.25,
        mean_ms=1.625,
        min_ms=1.25,
        trials=40,
        ci95_low_ms=1.4,
        ci95_high_ms=1.6,
        ci95_rel_halfwidth=0.1 / 1.5,
    )
    values.update(over)
    return RuntimeStats(**values)


def _environment() -> Environment:
    return Environment(
        device="cuda",
        gpu_name="NVIDIA H100",
        driver="560.35",
        cuda="12.6",
        torch="2.13.0",
        triton="3.7.1",
        python="3.11.7",
        network_isolation="netns",
    )


def test_request_with_reference_source_is_valid():
    req = EvalRequest(candidate="class ModelNew: ...", reference="class Model: ...")
    assert req.problem_id is None
    assert req.options == EvalOptions()


def test_request_with_problem_id_is_valid():
    req = EvalRequest(candidate="class ModelNew: ...", problem_id="level1/19_ReLU")
    assert req.reference is None
    assert req.problem_id == "level1/19_ReLU"


def test_request_with_both_reference_and_problem_id_is_rejected():
    with pytest.raises(ValidationError, match=ONE_REFERENCE):
        EvalRequest(candidate="x", reference="y", problem_id="level1/19_ReLU")


def test_request_with_neither_reference_nor_problem_id_is_rejected():
    with pytest.raises(ValidationError, match=ONE_REFERENCE):
        EvalRequest(candidate="x")


def test_empty_candidate_is_rejected():
    with pytest.raises(ValidationError, match="candidate"):
        EvalRequest(candidate="", reference="y")


def test_candidate_at_max_source_bytes_is_accepted():
    req = EvalRequest(candidate="a" * MAX_SOURCE_BYTES, reference="y")
    assert len(req.candidate) == MAX_SOURCE_BYTES


def test_candidate_over_max_source_bytes_is_rejected():
    with pytest.raises(ValidationError, match="candidate"):
        EvalRequest(candidate="a" * (MAX_SOURCE_BYTES + 1), reference="y")


def test_reference_over_max_source_bytes_is_rejected():
    with pytest.raises(ValidationError, match="reference"):
        EvalRequest(candidate="x", reference="a" * (MAX_SOURCE_BYTES + 1))


def test_candidate_over_max_source_bytes_in_utf8_is_rejected():
    source = "é" * MAX_SOURCE_BYTES
    assert len(source.encode()) == 2 * MAX_SOURCE_BYTES
    with pytest.raises(ValidationError):
        EvalRequest(candidate=source, reference="y")


def test_request_rejects_unknown_fields():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        EvalRequest(candidate="x", reference="y", priority=1)


def test_options_reject_unknown_fields_also_when_nested_in_a_request():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        EvalOptions(tolerance=0.1)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        EvalRequest.model_validate({"candidate": "x", "reference": "y", "options": {"seed": 3}})


def test_options_nested_as_dict_are_parsed():
    req = EvalRequest.model_validate(
        {"candidate": "x", "problem_id": "p", "options": {"device": "cpu", "atol": 0.5, "correctness_trials": 3}}
    )
    assert req.options.device == "cpu"
    assert req.options.atol == 0.5
    assert req.options.correctness_trials == 3
    assert req.options.timing is True


def test_options_default_to_server_settings():
    opts = EvalOptions()
    assert (opts.device, opts.atol, opts.rtol, opts.correctness_trials, opts.timing_budget_s) == (None,) * 5
    assert (opts.timing, opts.compare_compile, opts.profile) == (True, False, True)


@pytest.mark.parametrize("atol", [0.0, -1e-3, 1.5])
def test_options_atol_out_of_bounds_is_rejected(atol):
    with pytest.raises(ValidationError, match="atol"):
        EvalOptions(atol=atol)


@pytest.mark.parametrize("rtol", [0.0, -1.0, 2.0])
def test_options_rtol_out_of_bounds_is_rejected(rtol):
    with pytest.raises(ValidationError, match="rtol"):
        EvalOptions(rtol=rtol)


def test_options_tolerance_bounds_are_inclusive_of_one():
    opts = EvalOptions(atol=1.0, rtol=1e-9)
    assert (opts.atol, opts.rtol) == (1.0, 1e-9)


@pytest.mark.parametrize("trials", [0, -1, 101])
def test_options_correctness_trials_out_of_bounds_is_rejected(trials):
    with pytest.raises(ValidationError, match="correctness_trials"):
        EvalOptions(correctness_trials=trials)


@pytest.mark.parametrize("trials", [1, 100])
def test_options_correctness_trials_at_bounds_is_accepted(trials):
    assert EvalOptions(correctness_trials=trials).correctness_trials == trials


@pytest.mark.parametrize("budget", [0.0, 120.5])
def test_options_timing_budget_out_of_bounds_is_rejected(budget):
    with pytest.raises(ValidationError, match="timing_budget_s"):
        EvalOptions(timing_budget_s=budget)


def test_options_device_must_be_cuda_or_cpu():
    assert EvalOptions(device="cuda").device == "cuda"
    with pytest.raises(ValidationError, match="device"):
        EvalOptions(device="tpu")


def test_runtime_stats_allow_no_ci_half_width():
    assert _stats(ci95_rel_halfwidth=None).ci95_rel_halfwidth is None
    assert _stats(ci95_rel_halfwidth=0.02).ci95_rel_halfwidth == 0.02


def test_runtime_stats_require_the_ci_half_width_field():
    values = _stats().model_dump()
    del values["ci95_rel_halfwidth"]
    with pytest.raises(ValidationError, match="ci95_rel_halfwidth"):
        RuntimeStats(**values)


def test_eval_result_json_round_trip_is_lossless():
    result = EvalResult(
        problem="level1/19_ReLU",
        verdict=Verdict.PASSED,
        compiled=True,
        correct=True,
        speedup=1.25,
        speedup_vs_compile=0.75,
        timing_meaningful=True,
        candidate_runtime=_stats(),
        reference_runtime=_stats(median_ms=1.875, ci95_rel_halfwidth=None),
        correctness=CorrectnessSummary(
            trials_run=5,
            trials_passed=5,
            atol=1e-4,
            rtol=1e-4,
            max_abs_error=3.0517578125e-05,
            max_rel_error=1e-6,
            total_elements=64000,
        ),
        checks=[Check(name="outputs_match", passed=True, detail="5/5"), Check(name="deterministic", passed=False)],
        feedback="[passed] Correct on 5/5 trials.\nSpeedup 1.250x.",
        phases={"start": 1.5, "correctness": 0.25},
        environment=_environment(),
    )
    again = EvalResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert again.verdict is Verdict.PASSED
    assert again.protocol_version == PROTOCOL_VERSION
    assert again.environment.protocol_version == PROTOCOL_VERSION


def test_eval_result_failed_checks_lists_only_failures():
    result = EvalResult(
        problem="p",
        verdict=Verdict.INCORRECT,
        compiled=True,
        correct=False,
        timing_meaningful=False,
        checks=[
            Check(name="inputs_unchanged", passed=True),
            Check(name="outputs_match", passed=False, detail="trial 1"),
            Check(name="deterministic", passed=False),
        ],
        environment=_environment(),
    )
    assert [c.name for c in result.failed_checks()] == ["outputs_match", "deterministic"]


def test_eval_result_parses_verdict_from_its_string_value():
    raw = EvalResult(
        problem="p",
        verdict=Verdict.TIMEOUT,
        compiled=False,
        correct=False,
        timing_meaningful=False,
        environment=_environment(),
    ).model_dump(mode="json")
    assert raw["verdict"] == "timeout"
    raw["verdict"] = "no_such_verdict"
    with pytest.raises(ValidationError, match="verdict"):
        EvalResult.model_validate(raw)


def test_verdict_has_exactly_the_seven_values():
    assert {v.value for v in Verdict} == {
        "passed",
        "incorrect",
        "compile_error",
        "runtime_error",
        "timeout",
        "crashed",
        "rejected",
    }
    assert len(Verdict) == 7
    assert Verdict("runtime_error") is Verdict.RUNTIME_ERROR
    assert Verdict.PASSED == "passed"
