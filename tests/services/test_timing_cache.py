"""Stored reference timings: reused only after fresh calls agree with them, replaced when they do not, written
only by an evaluation that passed, keyed by everything that changes a reference's time, and timed by one
evaluation at a time while others wait for its figure."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import bundled_source, relu_candidate, unique

from services import timing_cache
from services.errors import EvaluationCancelled
from services.evaluator import Evaluator, environment
from services.parent import timing
from services.parent.timing import _revalidate, unconfirmed_drifts
from services.problems import Problem
from services.schema import CheckName, Environment, EvalOptions, RuntimeStats, Verdict
from services.settings import EvalSettings
from services.timing_cache import MemoryTimingStore, timing_key

CPU = EvalOptions(device="cpu")


@pytest.fixture(scope="module")
def tolerant() -> Iterator[Evaluator]:
    # CPU timings of the interpreter are too noisy for the default 5% agreement; the tolerance here only
    # separates "agrees roughly" from "a billion times off".
    with Evaluator(EvalSettings(correctness_trials=2, warm_children=2, reference_cache_tolerance=1000)) as ev:
        yield ev


def test_a_passing_evaluation_stores_its_reference_timing_and_the_next_reuses_it(tolerant, relu):
    store = MemoryTimingStore()
    first = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store).result
    assert first.verdict is Verdict.PASSED and first.timings_from_cache == []
    [(key, raw)] = store.items()
    assert RuntimeStats.model_validate_json(raw) == first.reference_runtime

    second = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store).result

    assert second.verdict is Verdict.PASSED
    assert "reference_wait" not in first.phases and "reference_wait" not in second.phases  # nobody held a claim
    assert second.timings_from_cache == ["reference"]
    assert second.reference_runtime == first.reference_runtime
    assert second.candidate_runtime.trials >= 3
    assert list(store) == [key]


@pytest.mark.parametrize("stored", ["far_off", "zero", "unreadable"])
def test_a_stored_timing_that_is_contradicted_or_unreadable_is_replaced(tolerant, relu, stored):
    store = MemoryTimingStore()
    first = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store).result
    key = next(iter(store))
    off = 1e-9 if stored == "far_off" else 0.0
    bogus = first.reference_runtime.model_copy(update={"median_ms": off, "process_medians_ms": [off]})
    store[key] = "{not json" if stored == "unreadable" else bogus.model_dump_json()

    second = tolerant.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store).result

    assert second.verdict is Verdict.PASSED and second.timings_from_cache == []
    assert second.reference_runtime.median_ms > 1e-6
    assert RuntimeStats.model_validate_json(store[key]) == second.reference_runtime


@pytest.mark.parametrize(("target", "processes"), [(1000.0, 2), (1e-12, 3)])
def test_a_reference_is_timed_in_several_processes_and_stored_as_the_mean_of_their_medians(relu, target, processes):
    # From two processes (reference_min_processes) on, one more is timed only while the mean of their medians is
    # less precise than the target: a target every pool meets stops at two, one none meets takes all three.
    settings = EvalSettings(
        correctness_trials=1,
        warm_children=1,
        cpu_reference_processes=3,
        reference_min_processes=2,
        target_ci_rel=target,
        reference_cache_tolerance=1000,
    )
    store = MemoryTimingStore()
    with Evaluator(settings) as ev:
        result = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store).result
    ref = result.reference_runtime
    assert result.verdict is Verdict.PASSED
    assert ref.processes == processes and len(ref.process_medians_ms) == processes
    assert ref.median_ms == pytest.approx(statistics.fmean(ref.process_medians_ms))
    assert result.candidate_runtime.processes == 1
    assert [RuntimeStats.model_validate_json(raw) for raw in store.values()] == [ref]
    # Outside the hold, giving memory back and starting the processes are told apart, and so are the starts' waits
    # for other evaluations (none here: the device is this evaluation's alone).
    assert {f"timing_reference_{part}" for part in ("release", "processes", "starts")} <= result.phases.keys()
    assert 0.0 <= result.phases["timing_reference_waits"] <= result.phases["timing_reference_starts"]
    # The reference's own timed calls, every process's: what its budget (`reference_budget_s`) bounds.
    assert 0.0 < result.phases["timing_reference_calls"] < result.phases["timing"]


def test_a_new_references_further_processes_load_side_by_side(relu):
    # Loading a further process waits on the host (on a busy multi-GPU host, for the driver); side by side, the
    # processes' waits overlap: two whose reference takes 1 s to construct start in about 1 s, not 2.
    slow = Problem(
        "level1/relu_slow_init",
        relu.source.replace("super().__init__()", "super().__init__()\n        import time\n        time.sleep(1.0)"),
    )
    assert slow.source != relu.source
    settings = EvalSettings(
        correctness_trials=1, warm_children=3, cpu_reference_processes=3, target_ci_rel=1e-12, reference_min_processes=3
    )
    with Evaluator(settings) as ev:
        result = ev.evaluate(slow, unique(bundled_source("level1/1_ReLU")), CPU, MemoryTimingStore()).result
    assert result.verdict is Verdict.PASSED, result.feedback
    assert result.reference_runtime.processes == 3
    assert 1.0 <= result.phases["timing_reference_starts"] < 1.8, result.phases


def test_a_candidate_rejected_after_its_timing_times_no_further_reference_processes(relu):
    # The further processes come after the candidate's last check (output dependence here): one rejected there
    # costs none of them, and its reference figure, one process's, is never stored.
    settings = EvalSettings(
        correctness_trials=1, warm_children=1, cpu_reference_processes=3, target_ci_rel=1e-12, reference_min_processes=3
    )
    decoy = (Path(__file__).parents[1] / "corpus" / "b8_decoy_dummy_buffer.py").read_text()
    store = MemoryTimingStore()
    with Evaluator(settings) as ev:
        result = ev.evaluate(relu, unique(decoy), CPU, store).result
    assert result.verdict is Verdict.REJECTED, result.feedback
    assert [c.name for c in result.failed_checks()] == [CheckName.OUTPUT_DEPENDS_ON_KERNELS]
    assert result.reference_runtime.processes == 1 and "timing_reference_processes" not in result.phases
    assert store == {}


STORED = RuntimeStats(
    median_ms=6.0,
    iqr_ms=0.1,
    mean_ms=6.0,
    min_ms=5.8,
    trials=200,
    ci95_low_ms=5.95,
    ci95_high_ms=6.05,
    ci95_rel_halfwidth=0.01,
    processes=2,
    process_medians_ms=[5.9, 6.1],  # fresh medians may fall in 5.723-6.283 ms
)


def test_a_stored_timing_whose_median_is_not_the_mean_of_its_processes_is_not_used():
    good = STORED
    bad = good.model_copy(update={"median_ms": 3.0})
    store = MemoryTimingStore(good=good.model_dump_json(), bad=bad.model_dump_json())
    assert timing_cache.load(store, "good") == good
    assert timing_cache.load(store, "bad") is None


def test_an_evaluation_that_fails_stores_nothing(tolerant, relu):
    store = MemoryTimingStore()
    result = tolerant.evaluate(relu, relu_candidate("return triton_relu(x) + 1"), CPU, store).result
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
        timing_key("src", "eager", env, EvalSettings(timing_placements=5)),
        timing_key("src", "eager", env, EvalSettings(placement_min_mb=0)),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


# -- one evaluation at a time times a reference ------------------------------------------------------------
class WatchedStore(MemoryTimingStore):
    """Sets `refused` when a claim is refused: the evaluation is then waiting for another's figure."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = threading.Event()

    def claim(self, key: str, owner: str, ttl_s: float) -> bool:
        taken = super().claim(key, owner, ttl_s)
        if not taken:
            self.refused.set()
        return taken


def stored_figure(median_ms: float = 1.0) -> RuntimeStats:
    return RuntimeStats(
        median_ms=median_ms,
        iqr_ms=0.0,
        mean_ms=median_ms,
        min_ms=median_ms,
        trials=20,
        ci95_low_ms=median_ms,
        ci95_high_ms=median_ms,
        ci95_rel_halfwidth=0.0,
        processes=1,
        process_medians_ms=[median_ms],
    )


def test_a_claim_is_held_by_one_owner_renewed_by_it_and_dropped_only_by_it():
    store = MemoryTimingStore()
    assert store.claim("k", "a", ttl_s=60)
    assert not store.claim("k", "b", ttl_s=60)
    assert store.claim("k", "a", ttl_s=60)  # renewed
    store.unclaim("k", "b")
    assert not store.claim("k", "b", ttl_s=60)
    store.unclaim("k", "a")
    assert store.claim("k", "b", ttl_s=0.05)
    time.sleep(0.1)
    assert store.claim("k", "a", ttl_s=60)  # b's claim expired


@pytest.mark.parametrize("holder_outcome", ["stores_a_figure", "fails_without_one"])
def test_an_evaluation_waits_while_another_holds_the_claim_on_its_reference(tolerant, relu, holder_outcome):
    store = WatchedStore()
    key = timing_key(relu.source, "eager", environment("cpu", "unknown"), tolerant.settings)
    assert store.claim(key, "another evaluation", ttl_s=600)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(tolerant.evaluate, relu, unique(bundled_source("level1/1_ReLU")), CPU, store)
        assert store.refused.wait(120), "the evaluation never asked for the claim"
        time.sleep(0.5)
        assert not running.done()  # still waiting: it does not time the reference beside the holder
        if holder_outcome == "stores_a_figure":
            store.put(key, stored_figure().model_dump_json())
        store.unclaim(key, "another evaluation")
        result = running.result(timeout=120).result
    assert result.verdict is Verdict.PASSED
    assert result.phases["reference_wait"] >= 0.5  # a stage of its own, out of `timing`
    if holder_outcome == "stores_a_figure":
        assert result.timings_from_cache == ["reference"] and result.reference_runtime == stored_figure()
    else:  # the holder left no figure: the waiting evaluation claimed the reference and timed it itself
        assert result.timings_from_cache == []
        assert RuntimeStats.model_validate_json(store[key]) == result.reference_runtime
    assert store.claim(key, "a third evaluation", ttl_s=1)  # the evaluation dropped its own claim


def test_a_cancelled_evaluation_stops_waiting_for_a_claimed_reference(tolerant, relu):
    store = WatchedStore()
    key = timing_key(relu.source, "eager", environment("cpu", "unknown"), tolerant.settings)
    store.claim(key, "another evaluation", ttl_s=600)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(tolerant.evaluate, relu, unique(bundled_source("level1/1_ReLU")), CPU, store)
        assert store.refused.wait(120)
        t0 = time.monotonic()
        assert tolerant.cancel()
        with pytest.raises(EvaluationCancelled):
            running.result(timeout=30)
    assert time.monotonic() - t0 < 5
    assert key not in store


class _Calls:
    """What revalidation drives: a timer whose reference calls take the given times in turn (the candidate's 1 ms)."""

    def __init__(self, reference_ms: list[float]):
        self.link = SimpleNamespace(settings=EvalSettings())  # 5 to 20 calls, 3% tolerance
        self.children = {"reference": None, "candidate": None}
        self.samples: dict[str, list[float]] = {"reference": [], "candidate": []}
        self._reference = iter(reference_ms)

    def __call__(self, side: str, keep: bool) -> tuple[float, float]:
        self.samples[side].append(next(self._reference) if side == "reference" else 1.0)
        return 0.0, 0.0


@pytest.mark.parametrize(
    "fresh_ms, calls, reused",
    [
        ([6.0] * 20, 5, True),  # five calls inside the range: the interval (their whole range) is inside it
        ([9.0] + [6.0] * 19, 9, True),  # an outlier keeps the interval wide until the 9th call drops it
        ([6.0, 6.3] * 10, 20, True),  # calls beyond the range, a median inside it: every call is made
        ([6.6] * 20, 20, False),  # a drift of 10%: timed again
    ],
)
def test_revalidation_stops_once_the_fresh_calls_interval_lies_inside_the_stored_range(fresh_ms, calls, reused):
    # Twenty reference calls were 82% of a KernelBench measurement's hold on an H200.
    timer = _Calls(fresh_ms)
    accepted = _revalidate(timer, {"reference": STORED})
    assert len(timer.samples["reference"]) == len(timer.samples["candidate"]) == calls
    assert accepted == ({"reference": STORED} if reused else {})


@pytest.mark.parametrize(
    "others_ms, stands",
    [
        ([6.0, 6.2, 6.1, 6.0], True),  # mean 6.075 in 5.723-6.283: the own process's offset was no drift
        ([6.3, 6.3, 6.2, 6.4], False),  # mean 6.3: a drift, confirmed; the new figure replaces the stored one
        ([], False),  # no other process to tell: the new figure
    ],
)
def test_a_drift_found_in_the_evaluations_own_process_stands_only_where_the_other_processes_confirm_it(
    others_ms, stands
):
    kept = unconfirmed_drifts({"reference": STORED}, {"reference": others_ms}, tolerance=0.03)
    assert kept == ({"reference": STORED} if stands else {})
    assert unconfirmed_drifts({}, {"reference": [6.0]}, tolerance=0.03) == {}  # nothing stored: a new reference


def test_a_stored_timing_the_other_processes_agree_with_stands_when_the_own_process_disagreed(relu, monkeypatch):
    settings = EvalSettings(
        correctness_trials=1,
        warm_children=1,
        cpu_reference_processes=2,
        reference_min_processes=2,
        reference_children_kept=1,
        reference_cache_tolerance=1000,
    )
    store = MemoryTimingStore()
    with Evaluator(settings) as ev:
        first = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store).result
        stored, kept = dict(store), list(ev.references._idle.values())
        monkeypatch.setattr(timing, "_revalidate", lambda timer, cached: {})  # the own process finds a drift
        second = ev.evaluate(relu, unique(bundled_source("level1/1_ReLU")), CPU, store).result
        # That process's offset would fail every later revalidation (in an H200 run, 23 of 39 evaluations reused one
        # such child and timed the reference again): it is not kept, and the next evaluation starts a fresh one.
        assert len(kept) == 1 and not ev.references._idle
    assert first.verdict is second.verdict is Verdict.PASSED
    assert "timing_reference_processes" in second.phases  # timed again in another process, which agreed
    assert second.phases["timing_reference_calls"] > 0  # those calls count, as a new reference's would
    assert second.timings_from_cache == ["reference"] and second.reference_runtime == first.reference_runtime
    assert store == stored
