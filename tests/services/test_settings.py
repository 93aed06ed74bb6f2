"""EvalSettings: defaults and KERNELGYM_* environment variables."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from services.settings import EvalSettings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No KERNELGYM_* variable from the surrounding shell leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("KERNELGYM_"):
            monkeypatch.delenv(name)


def test_defaults():
    s = EvalSettings()
    assert s.fp32_tol == 1e-4
    assert s.half_tol == 1e-2
    assert s.correctness_trials == 5
    assert s.timing_budget_s == 10.0
    assert s.min_timed_calls == 20
    assert s.max_timed_calls == 2000
    assert s.target_ci_rel == 0.01
    assert s.warm_children == 4
    assert s.defences is True
    assert s.policy == "default"
    assert s.strict_min_coverage == 0.9
    assert s.feedback_max_chars == 4000


def test_int_setting_is_read_from_env(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CORRECTNESS_TRIALS", "7")
    assert EvalSettings().correctness_trials == 7


def test_float_settings_are_read_from_env(monkeypatch):
    monkeypatch.setenv("KERNELGYM_FP32_TOL", "1e-5")
    monkeypatch.setenv("KERNELGYM_HALF_TOL", "0.05")
    s = EvalSettings()
    assert s.fp32_tol == 1e-5
    assert s.half_tol == 0.05


def test_env_var_names_are_case_insensitive(monkeypatch):
    monkeypatch.setenv("kernelgym_warm_children", "0")
    assert EvalSettings().warm_children == 0


def test_variables_without_the_prefix_are_ignored(monkeypatch):
    monkeypatch.setenv("CORRECTNESS_TRIALS", "9")
    assert EvalSettings().correctness_trials == 5


def test_unknown_prefixed_variables_are_ignored(monkeypatch):
    monkeypatch.setenv("KERNELGYM_NO_SUCH_SETTING", "1")
    assert EvalSettings().correctness_trials == 5


def test_constructor_arguments_override_env(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CORRECTNESS_TRIALS", "7")
    assert EvalSettings(correctness_trials=3).correctness_trials == 3


def test_non_integer_value_for_int_setting_is_rejected(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CORRECTNESS_TRIALS", "abc")
    with pytest.raises(ValidationError, match="correctness_trials"):
        EvalSettings()


def test_non_number_value_for_float_setting_is_rejected(monkeypatch):
    monkeypatch.setenv("KERNELGYM_FP32_TOL", "tight")
    with pytest.raises(ValidationError, match="fp32_tol"):
        EvalSettings()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KERNELGYM_CORRECTNESS_TRIALS", "0"),
        ("KERNELGYM_TIMING_BUDGET_S", "0"),
        ("KERNELGYM_MIN_TIMED_CALLS", "2"),
        ("KERNELGYM_RECHECK_FRACTION", "1.5"),
        ("KERNELGYM_MEMORY_LIMIT_MB", "255"),
        ("KERNELGYM_FEEDBACK_MAX_CHARS", "199"),
    ],
)
def test_out_of_range_env_values_are_rejected(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=name.removeprefix("KERNELGYM_").lower()):
        EvalSettings()
