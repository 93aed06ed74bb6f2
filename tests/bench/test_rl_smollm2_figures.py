"""The SmolLM2 run's before/after figures: the change of a pooled rate with its interval stratified by seed and
problem, since problems differ far more from one another than a few training steps move one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def smollm2(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import rl_smollm2

    return rl_smollm2


def test_a_stratified_change_counts_each_problems_own_spread_only(smollm2):
    # Three problems of 8 answers each: 0 -> 0, 8 -> 8 and 2 -> 6 right. Change (14 - 10) / 24 = 1/6. Each side's
    # variance term is (8/24)^2 p(1-p)/8 with p = (k + 0.5)/9: 0.5/9 and 8.5/9 give p(1-p) = 0.052469 (twice per
    # side), 2.5/9 and 6.5/9 give 0.200617; the sum is (4 x 0.052469 + 2 x 0.200617) / 72 = 0.0084877, and
    # 1.96 x sqrt(0.0084877) = 0.18057. Unstratified, 10/24 -> 14/24 would have had +-0.2789.
    change, low, high = smollm2.stratified_change([(0, 8, 0, 8), (8, 8, 8, 8), (2, 8, 6, 8)])
    assert change == pytest.approx(1 / 6)
    assert (high - low) / 2 == pytest.approx(0.18057, abs=1e-4)
    assert low == pytest.approx(1 / 6 - 0.18057, abs=1e-4)


def test_strata_at_zero_or_one_still_count_some_spread(smollm2):
    change, low, high = smollm2.stratified_change([(0, 8, 0, 8), (8, 8, 8, 8)])
    assert change == 0 and low < 0 < high


def test_figures_pair_each_seeds_problems_before_and_after(smollm2):
    def evaluation(right: dict[str, int]) -> dict:
        by_problem = {pid: {"n": 8, "correct": k, "fast1": k, "rejected": 0} for pid, k in right.items()}
        total = {m: sum(p[m] for p in by_problem.values()) for m in ("n", "correct", "fast1", "rejected")}
        return {"train": {**total, "by_problem": by_problem}}

    records = [
        {"before": evaluation({"a": 0, "b": 8, "c": 2}), "after": evaluation({"a": 0, "b": 8, "c": 6}), "curve": []}
    ]
    f = smollm2.figures(records)["train/correct"]
    assert f["before"] == pytest.approx(10 / 24) and f["after"] == pytest.approx(14 / 24)
    assert f["change"] == pytest.approx(1 / 6)
    assert (f["change_ci"][1] - f["change_ci"][0]) / 2 == pytest.approx(0.18057, abs=1e-4)
    assert math.isnan(smollm2.figures(records)["mrs_kept_share"])


def test_trloo_against_grpo_is_the_mean_paired_difference_with_a_t_interval_over_seeds(smollm2):
    # Two seeds on one set of 10 answers, after training: TRLOO 6 and 5 right, GRPO 4 and 4. Differences 0.2 and
    # 0.1: mean 0.15, sd 0.070711, half-width t(0.975, 1) x sd / sqrt(2) = 12.706 x 0.05 = 0.6353.
    def run(seed: int, estimator: str, right: int, rewards: list[float]) -> dict:
        after = {"train": {"n": 10, "correct": right, "fast1": right // 2}}
        curve = [{"reward/turn1": r, "turns/mean": 1.5} for r in rewards]
        return {"seed": seed, "estimator": estimator, "after": after, "curve": curve}

    records = [
        run(0, "trloo", 6, [0.0, 0.0, 0.4, 0.6]),
        run(0, "grpo", 4, [0.0, 0.0, 0.2, 0.2]),
        run(1, "trloo", 5, [0.0, 0.1, 0.3, 0.3]),
        run(1, "grpo", 4, [0.0, 0.1, 0.3, 0.1]),
    ]
    out = smollm2.estimator_comparison(records)
    assert out["pairs"] == 2
    correct = out["train/correct"]
    assert correct["per_seed"] == pytest.approx([0.2, 0.1]) and correct["mean"] == pytest.approx(0.15)
    assert correct["ci"] == pytest.approx((0.15 - 0.6353, 0.15 + 0.6353), abs=1e-4)
    assert out["train/fast1"]["per_seed"] == pytest.approx([0.1, 0.0])  # 3 - 2 and 2 - 2 of 10
    # The mean turn-1 reward of each run's last half of steps: 0.5 - 0.2 and 0.3 - 0.2.
    assert out["train/late_reward_turn1"]["per_seed"] == pytest.approx([0.3, 0.1])
    assert out["turns_per_episode"] == {"trloo": pytest.approx(1.5), "grpo": pytest.approx(1.5)}
    one = smollm2.paired_difference([0.2])
    assert one["mean"] == pytest.approx(0.2) and all(math.isnan(x) for x in one["ci"])
