"""Auditable verdicts: the check that decides a `rejected` or `timeout` result records what it measured and the
thresholds it held that to, and both survive the result's JSON round trip."""

from __future__ import annotations

import math

from helpers import relu_candidate

from services.schema import Check, EvalOptions, EvalResult, Verdict

NO_TIMING = EvalOptions(device="cpu", timing=False)


def test_measured_values_and_thresholds_survive_json_even_when_not_finite():
    check = Check(
        name="timing_wall_clock",
        passed=False,
        measured={"excess_ms": 1.61, "calls": 40, "confirmed": True, "inf_ms": math.inf, "nan_ms": math.nan},
        thresholds={"excess_ms": 1.05, "policy": "default"},
    )
    back = Check.model_validate_json(check.model_dump_json())
    assert back.measured == {"excess_ms": 1.61, "calls": 40, "confirmed": True, "inf_ms": "inf", "nan_ms": "nan"}
    assert type(back.measured["calls"]) is int and type(back.measured["confirmed"]) is bool
    assert back.thresholds == check.thresholds


def test_a_timeout_records_how_long_it_waited_and_its_limit(strict_timeouts, relu):
    result = strict_timeouts.evaluate(relu, relu_candidate("while True:\n    pass"), NO_TIMING).result
    assert result.verdict is Verdict.TIMEOUT
    [check] = [c for c in result.failed_checks() if c.name == "time_limit"]
    assert check.measured["waited_s"] >= check.thresholds["limit_s"] > 0
    back = EvalResult.model_validate_json(result.model_dump_json())
    assert [c for c in back.failed_checks() if c.name == "time_limit"] == [check]


def test_a_rejection_records_the_measured_value_and_threshold(evaluator, relu):
    body = "import threading\nthreading.Thread(target=lambda: __import__('time').sleep(30), daemon=True).start()\n"
    result = evaluator.evaluate(relu, relu_candidate(body + "return triton_relu(x)"), NO_TIMING).result
    assert result.verdict is Verdict.REJECTED
    [check] = [c for c in result.failed_checks() if c.name == "no_new_threads"]
    assert check.measured["new_threads"] >= 1 and check.thresholds == {"new_threads": 0}
