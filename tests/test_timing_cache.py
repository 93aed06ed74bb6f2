"""Stored reference timings: reused only after fresh calls agree with them, replaced when they do not, written
only by an evaluation that passed, and keyed by everything that changes a reference's time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import bundled_source, relu_candidate, unique

from services.evaluator import Evaluator
from services.schema import Environment, EvalOptions, RuntimeStats, Verdict
from services.settings import EvalSettings
from services.timing_cache import timing_key

CPU = EvalOptions(device="cpu")


class DictStore(dict):
    """A TimingStore in memory (the service's lives in Redis and is tested through the service)."""

    def put(self, key: str, value: str) -> None:
        self[key] = value


@pytest.fixture(scope="module")
def tolerant() -> Iterator[Evaluator]:
    # CPU timings of the interpreter are too noisy for the default 5% agreement; the tolerance here only
    # separates "agrees roughly" from "a billion times off".
    with Evaluator(EvalSettings(correctness_trials=2, warm_children=2, reference_cache_tolerance=1000)) as ev:
        yield ev


def test_a_passing_evaluation_stores_its_reference_timing_and_the_next_reuses_it(tolerant, relu):
    store = DictStore()
    first = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store)
    assert first.verdict is Verdict.PASSED and first.timings_from_cache == []
    [(key, raw)] = store.items()
    assert RuntimeStats.model_validate_json(raw) == first.reference_runtime

    second = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store)

    assert second.verdict is Verdict.PASSED
    assert second.timings_from_cache == ["reference"]
    assert second.reference_runtime == first.reference_runtime
    assert second.candidate_runtime.trials >= 3
    assert list(store) == [key]


@pytest.mark.parametrize("stored", ["far_off", "zero", "unreadable"])
def test_a_stored_timing_that_is_contradicted_or_unreadable_is_replaced(tolerant, relu, stored):
    store = DictStore()
    first = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store)
    key = next(iter(store))
    bogus = first.reference_runtime.model_copy(update={"median_ms": 1e-9 if stored == "far_off" else 0.0})
    store[key] = "{not json" if stored == "unreadable" else bogus.model_dump_json()

    second = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store)

    assert second.verdict is Verdict.PASSED and second.timings_from_cache == []
    assert second.reference_runtime.median_ms > 1e-6
    assert RuntimeStats.model_validate_json(store[key]) == second.reference_runtime


def test_an_evaluation_that_fails_stores_nothing(tolerant, relu):
    store = DictStore()
    result = tolerant.evaluate(relu, relu_candidate("return triton_relu(x) + 1"), CPU, store)
    assert result.verdict is Verdict.INCORRECT
    assert store == {}


def test_the_key_changes_with_source_variant_gpu_versions_and_timing_protocol():
    env = Environment(
        device="cuda",
        gpu_name="NVIDIA H100 80GB HBM3",
        torch="2.11.0",
        triton="3.6.0",
        python="3.12.3",
        network_isolation="netns",
    )
    settings = EvalSettings()
    base = timing_key("src", "eager", env, settings)
    assert base == timing_key("src", "eager", env.model_copy(update={"network_isolation": "none"}), settings)
    variants = [
        timing_key("src2", "eager", env, settings),
        timing_key("src", "compiled", env, settings),
        timing_key("src", "eager", env.model_copy(update={"gpu_name": "NVIDIA H200"}), settings),
        timing_key("src", "eager", env.model_copy(update={"torch": "2.13.0"}), settings),
        timing_key("src", "eager", env.model_copy(update={"triton": "3.7.1"}), settings),
        timing_key("src", "eager", env, EvalSettings(l2_flush_factor=4.0)),
    ]
    assert base not in variants and len(set(variants)) == len(variants)
