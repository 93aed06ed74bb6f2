"""RLSettings: the RL client's one settings object, read from KERNELGYM_* variables (the only channel into Ray
workers and framework callbacks), with unusable values named in one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

import rl_client
from rl_client.config import TrainConfig
from rl_client.settings import SETTINGS_ENV, ConfigurationError, RLSettings, TrainerSettings, TurnFiltering


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.upper().startswith("KERNELGYM_"):
            monkeypatch.delenv(name)


def test_variables_are_read_and_overrides_that_are_not_none_win(monkeypatch):
    monkeypatch.setenv("KERNELGYM_URL", "http://gym:8000")
    monkeypatch.setenv("KERNELGYM_API_KEY", "secret")
    monkeypatch.setenv("KERNELGYM_RL_TIMEOUT_S", "90")
    monkeypatch.setenv("KERNELGYM_RL_MAX_TURNS", "4")
    monkeypatch.setenv(SETTINGS_ENV, TrainerSettings(estimator="trloo", prs=False).to_json())
    monkeypatch.setenv("KERNELGYM_DEVICE_CLASS", "h100")  # the worker's own class, not the client's
    s = RLSettings.from_env(timeout_s=30, device_class=None)
    assert (s.url, s.api_key, s.timeout_s, s.max_turns) == ("http://gym:8000", "secret", 30.0, 4)
    assert s.device_class is None
    assert s.trainer == TrainerSettings(estimator="trloo", prs=False)


def test_the_defaults_serve_a_local_service():
    s = RLSettings.from_env()
    assert (s.url, s.api_key, s.timeout_s, s.max_turns, s.feedback_chars) == (
        "http://127.0.0.1:8000",
        None,
        1800.0,
        3,
        2000,
    )
    assert s.trainer == TrainerSettings()


def test_settings_are_hashable_so_adapters_can_keep_one_scorer_per_configuration():
    assert hash(RLSettings.from_env()) == hash(RLSettings.from_env())


def test_variables_lists_every_name_read():
    assert RLSettings.variables() == {
        "KERNELGYM_URL",
        "KERNELGYM_API_KEY",
        "KERNELGYM_RL_DEVICE_CLASS",
        "KERNELGYM_RL_TIMEOUT_S",
        "KERNELGYM_RL_MAX_TURNS",
        "KERNELGYM_RL_FEEDBACK_CHARS",
        "KERNELGYM_RL_TURN_FORMAT",
        "KERNELGYM_RL_FAULT_RETRIES",
        "KERNELGYM_RL_FAULT_BACKOFF_S",
        "KERNELGYM_REWARD_ANSWER_WITHIN_S",
        SETTINGS_ENV,
    }


def test_no_module_of_the_client_reads_its_variables_but_the_settings():
    """One place reads the environment: a variable read anywhere else escapes the table and the one-line errors."""
    root = Path(rl_client.__file__).parent
    readers = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "settings.py" and re.search(r"environ(\.get)?[\[(]\s*[\"']KERNELGYM_", path.read_text())
    ]
    assert readers == []


def test_both_backends_filter_turns_with_one_definition():
    assert issubclass(TrainConfig, TurnFiltering) and issubclass(TrainerSettings, TurnFiltering)
    assert TrainConfig(model="m").model_dump(include=set(TurnFiltering.model_fields)) == TurnFiltering().model_dump()


def test_changed_weights_under_the_published_reward_name_are_refused():
    with pytest.raises(ValidationError, match="give changed weights a name of their own"):
        TrainConfig.model_validate({"model": "m", "reward": {"speedup_cap": 2}})
    assert TrainConfig.model_validate({"model": "m", "reward": {"name": "capped", "speedup_cap": 2}}).reward.id == (
        "capped/v1"
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("KERNELGYM_RL_TIMEOUT_S", "-1", "KERNELGYM_RL_TIMEOUT_S: Input should be greater than 0"),
        ("KERNELGYM_RL_MAX_TURNS", "three", "KERNELGYM_RL_MAX_TURNS: Input should be a valid integer"),
        (SETTINGS_ENV, "{not json", f"{SETTINGS_ENV}: not a JSON object"),
        (SETTINGS_ENV, '{"estimator": "ppo"}', f"{SETTINGS_ENV}: Input should be 'trloo'"),
    ],
)
def test_an_unusable_variable_is_named_in_one_line(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as raised:
        RLSettings.from_env()
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_the_cli_reports_an_unusable_variable_without_a_traceback():
    env = {**os.environ, "KERNELGYM_RL_TIMEOUT_S": "0"}
    argv = [sys.executable, "-m", "rl_client.cli", "openrlhf-prompts", "--out", "x.jsonl", "--service", "http://h:1"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    expected = "kernelgym-rl openrlhf-prompts: KERNELGYM_RL_TIMEOUT_S: Input should be greater than 0"
    assert done.stderr.strip() == expected
