"""Shared fixtures: real child processes, real torch and Triton (interpreter on CPU)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.problems import Problem, bundled_problems


@pytest.fixture(scope="session")
def problems():
    return bundled_problems()


@pytest.fixture(scope="session")
def relu(problems) -> Problem:
    return problems.load("level1/1_ReLU")


@pytest.fixture(scope="session")
def evaluator() -> Iterator:
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    with Evaluator(EvalSettings(correctness_trials=3, warm_children=2)) as ev:
        yield ev


@pytest.fixture(scope="session")
def strict_timeouts() -> Iterator:
    """An evaluator whose phase timeouts are short enough for hang tests."""
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    with Evaluator(
        EvalSettings(
            correctness_trials=2, load_timeout_s=20, correctness_timeout_s=4, timing_timeout_s=10, warm_children=1
        )
    ) as ev:
        yield ev


@pytest.fixture(scope="session")
def undefended() -> Iterator:
    """Reward-hacking defences off: for testing the isolation layers underneath them on their own."""
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    with Evaluator(EvalSettings(correctness_trials=2, defences=False, warm_children=1)) as ev:
        yield ev
