"""Fast@p: one definition (KernelBench's fast_p), used by the trainer's metrics and the model evaluation."""

from __future__ import annotations

from rl_client.algorithms.rewards import DRKERNEL_PR, turn_reward
from rl_client.metrics import fast_p, is_fast
from rl_client.model_eval import summarize
from rl_client.scoring import TurnOutcome


def test_fast_means_correct_and_strictly_faster_than_p():
    assert is_fast(True, 1.5, 1.2) and is_fast(True, 0.9, 0.0)
    assert not is_fast(True, 1.2, 1.2)  # exceeds, not reaches
    assert not is_fast(False, 9.0, 1.0)  # an incorrect (or rejected) kernel is never fast
    assert not is_fast(True, None, 0.0)  # no measured speedup (CPU): a miss
    assert fast_p([(True, 2.0), (True, 1.1), (False, 3.0), (True, None)], 1.0) == 0.5
    assert fast_p([], 1.0) == 0.0


def outcome(verdict: str, speedup: float | None) -> TurnOutcome:
    reward = turn_reward(DRKERNEL_PR, verdict, speedup)
    return TurnOutcome(reward, verdict, verdict == "passed", speedup, None, "")


def test_model_evaluation_reports_fast_p_with_the_same_function():
    outcomes = [outcome("passed", 1.2), outcome("passed", 2.0), outcome("incorrect", None), outcome("rejected", None)]
    fast = summarize(outcomes)["fast_p"]
    assert fast == {"1.0": 0.5, "1.2": 0.25, "1.5": 0.25, "2.0": 0.0}
