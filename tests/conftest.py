"""Shared fixtures: real child processes, real torch and Triton (interpreter on CPU)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


# -- the service: real Redis, real Celery worker processes, real HTTP ------------------------------------
# CPU timings of the interpreter are too noisy for the default 5% agreement with a stored reference timing.
WORKER_ENV = {
    "KERNELGYM_CORRECTNESS_TRIALS": "2",
    "KERNELGYM_WARM_CHILDREN": "2",
    "KERNELGYM_REFERENCE_CACHE_TOLERANCE": "1000",
}


@contextmanager
def service_stack(workdir: Path, workers: int = 2) -> Iterator:
    """Redis, a development-mode gateway and `workers` CPU workers, each its own process."""
    from kernelgym.stack import LocalStack

    # `h100` is accepted with no worker serving it: the tests use it to hold evaluations queued.
    env = {**WORKER_ENV, "KERNELGYM_DEVICE_CLASSES": '["h100"]'}
    with LocalStack(workdir, env=env) as s:
        s.start_redis()
        s.start_gateway()
        for _ in range(workers):
            s.start_worker()
        s.wait_ready(workers=workers)
        yield s


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Iterator:
    """The stack shared by the API tests."""
    with service_stack(tmp_path_factory.mktemp("stack")) as s:
        yield s


@pytest.fixture
def gym(stack) -> Iterator:
    from gym_client import KernelGymClient

    with KernelGymClient(stack.base_url, timeout=30) as client:
        yield client
