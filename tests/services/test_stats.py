"""Timing statistics: the median's distribution-free CI and the summary fields."""

from __future__ import annotations

import math
import random

import pytest

from services.stats import (
    MIN_SAMPLES_FOR_CI,
    ci_rel_halfwidth,
    low_quantile,
    mean_ci_halfwidth,
    median_ci,
    median_ranks,
    min_calls,
    pool,
    pool_precise,
    stop_target,
    summarize,
)


def test_median_ci_ranks_for_n_20():
    # Binomial(20, 1/2): P(X <= 5) = 21700 / 2**20 = 2.07% <= 2.5% < P(X <= 6) = 5.77%, so ranks 6 and 15
    # (coverage 1 - 2 * 2.07% = 95.9%).
    xs = [float(i) for i in range(1, 21)]
    assert median_ci(xs) == (6.0, 15.0)


def test_median_ci_ranks_for_n_100():
    # P(X <= 39) = 1.76% <= 2.5% < P(X <= 40) = 2.84%: ranks 40 and 61.
    xs = [float(i) for i in range(1, 101)]
    assert median_ci(xs) == (40.0, 61.0)


def test_one_slow_call_among_nine_is_outside_the_medians_interval():
    # n = 9: P(X <= 1) = 10 / 512 = 1.95% <= 2.5% < P(X <= 2) = 46 / 512 = 8.98%: ranks 2 and 8, so a placement's
    # nine calls with one slow outlier (a call 16 times the others) report an interval of their own spread.
    assert median_ranks(9) == (2, 8)
    calls = [1.45, 1.451, 1.452, 1.449, 1.453, 1.448, 1.452, 1.451, 23.0]
    assert median_ci(calls) == (1.449, 1.453)
    assert ci_rel_halfwidth(calls) < 0.002


def test_median_ci_sorts_its_input():
    xs = [float(i) for i in range(1, 101)]
    shuffled = xs[:]
    random.Random(0).shuffle(shuffled)
    assert median_ci(shuffled) == (40.0, 61.0)
    assert shuffled != xs  # the caller's list is not sorted in place


def test_median_ci_of_small_samples_clamps_to_the_extremes():
    # n = 5: even the range covers the median only with 1 - 2 / 32 = 93.75%: the range.
    assert median_ci([3.0, 1.0, 5.0, 2.0, 4.0]) == (1.0, 5.0)
    # n < 3: min and max.
    assert median_ci([2.0, 1.0]) == (1.0, 2.0)
    assert median_ci([7.0]) == (7.0, 7.0)


def test_ci_rel_halfwidth_for_n_20():
    xs = [float(i) for i in range(1, 21)]
    # CI (6, 15), median 10.5.
    assert ci_rel_halfwidth(xs) == pytest.approx((15 - 6) / 2 / 10.5)


def test_ci_rel_halfwidth_of_constant_samples_is_zero():
    assert ci_rel_halfwidth([0.25] * 50) == 0.0


def test_ci_rel_halfwidth_under_three_samples_is_infinite():
    assert ci_rel_halfwidth([]) == math.inf
    assert ci_rel_halfwidth([1.0]) == math.inf
    assert ci_rel_halfwidth([1.0, 1.0]) == math.inf


def test_ci_rel_halfwidth_with_zero_median_is_infinite():
    assert ci_rel_halfwidth([0.0, 0.0, 0.0]) == math.inf


def test_a_tick_floor_widens_the_stop_target_only_for_microsecond_medians():
    tick = 3.2e-5  # ms
    # 4.064 us: 1.6 ticks = 0.0512 us = 1.26% > 1%.
    assert stop_target(0.004064, 0.01, tick, 1.6) == pytest.approx(0.0512 / 4.064)
    # 40 us: 1.6 ticks = 0.128% < 1%: the target stands.
    assert stop_target(0.04, 0.01, tick, 1.6) == 0.01
    # No floor, or no median to scale it by.
    assert stop_target(0.004064, 0.01, tick, 0.0) == 0.01
    assert stop_target(0.0, 0.01, tick, 1.6) == 0.01


def test_quantised_samples_two_ticks_apart_meet_a_floor_of_1_6_ticks_not_the_one_percent_target():
    # 100 samples of a 4 us kernel on a 32 ns timer, 20 on each of five ticks (3.968-4.096 us). The median's CI
    # ranks are (40, 61): values 4.000 and 4.064, two ticks apart, so the half-width with half a tick added is
    # (0.064 / 2 + 0.016) / 4.032 = 1.5 ticks = 1.19%: above 1%, within 1.6 ticks (1.27%; 1.5 would sit on the
    # boundary, where the float32 event times decide).
    tick = 3.2e-5
    spread = [0.003968] * 20 + [0.004] * 20 + [0.004032] * 20 + [0.004064] * 20 + [0.004096] * 20
    width = ci_rel_halfwidth(spread, tick)
    assert width == pytest.approx(1.5 * tick / 0.004032)
    assert 0.01 < width <= stop_target(0.004032, 0.01, tick, 1.6)


def test_summarize_fields_for_odd_count():
    s = summarize([4.0, 1.0, 100.0, 3.0, 2.0])
    assert s.median_ms == 3.0
    # Inclusive quartiles of 1, 2, 3, 4, 100 sit at positions 1 and 3: 2 and 4.
    assert s.iqr_ms == 2.0
    assert s.mean_ms == 22.0
    assert s.min_ms == 1.0
    assert s.trials == 5
    assert (s.ci95_low_ms, s.ci95_high_ms) == (1.0, 100.0)
    assert s.ci95_rel_halfwidth == pytest.approx(99 / 2 / 3)


def test_summarize_interpolates_inclusive_quartiles():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    # Positions 0.75 and 2.25: 1.75 and 3.25.
    assert s.iqr_ms == pytest.approx(1.5)
    assert s.median_ms == 2.5
    assert s.mean_ms == 2.5


def test_summarize_of_twenty_samples_carries_the_ci():
    xs = [float(i) for i in range(20, 0, -1)]
    s = summarize(xs)
    assert (s.ci95_low_ms, s.ci95_high_ms) == (6.0, 15.0)
    assert s.median_ms == 10.5
    # Quartile positions 19/4 = 4.75 and 14.25 over 1..20: 5.75 and 15.25.
    assert s.iqr_ms == pytest.approx(9.5)
    assert s.ci95_rel_halfwidth == pytest.approx(4.5 / 10.5)


def test_summarize_single_sample():
    s = summarize([0.5])
    assert (s.median_ms, s.iqr_ms, s.mean_ms, s.min_ms, s.trials) == (0.5, 0.0, 0.5, 0.5, 1)
    assert (s.ci95_low_ms, s.ci95_high_ms) == (0.5, 0.5)
    assert s.ci95_rel_halfwidth is None


def test_summarize_two_samples_has_no_ci_half_width():
    s = summarize([1.0, 3.0])
    assert s.median_ms == 2.0
    assert s.iqr_ms == pytest.approx(1.0)  # positions 0.25 and 0.75: 1.5 and 2.5
    assert s.ci95_rel_halfwidth is None


def test_summarize_empty_raises():
    with pytest.raises(ValueError, match="no timing samples"):
        summarize([])


def test_low_quantile_ignores_spikes_but_not_a_constant_cost():
    base = [1.0] * 40 + [50.0] * 10  # a fifth of the calls preempted
    assert low_quantile(base) == 1.0
    assert low_quantile([x + 0.7 for x in base]) == pytest.approx(1.7)
    assert low_quantile([3.0]) == 3.0


def test_half_a_timer_tick_widens_a_quantised_interval():
    # Samples on one tick: no spread, but the clock cannot resolve better than half a tick either way.
    assert ci_rel_halfwidth([0.005] * 50, resolution_ms=0.002) == pytest.approx(0.001 / 0.005)
    stats = summarize([0.005] * 50, resolution_ms=0.002, target=0.01)
    assert (stats.ci95_low_ms, stats.ci95_high_ms) == pytest.approx((0.004, 0.006))
    assert stats.ci95_target_rel == 0.01 and stats.processes == 1 and stats.process_medians_ms == [0.005]


def test_a_means_t_interval_takes_students_quantile_for_its_degrees_of_freedom():
    # Six 1s and six 3s: sd sqrt(12 / 11) = 1.04447; t(0.975, 11) = 2.201, so 2.201 x 1.04447 / sqrt(12) = 0.66363.
    assert mean_ci_halfwidth([1.0] * 6 + [3.0] * 6) == pytest.approx(0.66363, abs=1e-4)
    # Two values: t(0.975, 1) = 12.706 x sd 0.7071 / sqrt(2) = 6.353.
    assert mean_ci_halfwidth([1.0, 2.0]) == pytest.approx(6.353, abs=1e-3)


def test_pooled_processes_report_the_mean_of_their_medians_with_a_t_interval():
    # Two clusters of per-process medians, as a small torch reduction showed across child processes.
    per_process = [[6.1, 6.0, 6.2], [6.7, 6.6, 6.8], [6.2, 6.1, 6.3]]
    stats = pool(per_process)
    assert stats.process_medians_ms == [6.1, 6.7, 6.2]
    assert stats.median_ms == pytest.approx(19.0 / 3)
    # t(0.975, 2) = 4.303; the medians' sample standard deviation is 0.3215.
    half = 4.303 * 0.32146 / math.sqrt(3)
    assert (stats.ci95_low_ms, stats.ci95_high_ms) == pytest.approx((19 / 3 - half, 19 / 3 + half), rel=1e-4)
    assert stats.ci95_rel_halfwidth == pytest.approx(half / (19 / 3), rel=1e-4)
    assert (stats.trials, stats.min_ms, stats.processes) == (9, 6.0, 3)


def test_one_process_flipping_state_moves_the_pool_by_its_share_only():
    fast, slow = [6.1] * 20, [6.7] * 20
    four_fast = pool([fast, fast, fast, fast, slow]).median_ms
    three_fast = pool([fast, fast, fast, slow, slow]).median_ms
    assert three_fast - four_fast == pytest.approx(0.6 / 5)


def test_pooling_needs_samples_from_every_process():
    with pytest.raises(ValueError):
        pool([[1.0], []])


def test_slow_calls_need_fewer_calls_but_never_fewer_than_six():
    # 250 ms of calls: twenty 10 ms calls; a 25 ms call needs ten; an 80 ms call (KernelBench at its published
    # sizes) would need four, which cannot bound a median at 95%, so six.
    assert min_calls(10.0, 20, 250.0) == 20
    assert min_calls(25.0, 20, 250.0) == 10
    assert min_calls(80.0, 20, 250.0) == MIN_SAMPLES_FOR_CI == 6
    assert min_calls(80.0, 4, 250.0) == 4  # a setting of fewer is the user's to make
    assert min_calls(0.0, 20, 250.0) == 20
    assert median_ci([5.0, 1.0, 3.0, 2.0, 6.0, 4.0]) == (1.0, 6.0)  # six samples: the median's CI is their range


def test_three_processes_pool_precisely_only_where_their_medians_agree_within_about_half_a_percent():
    # t(0.975, 2) = 4.303: medians 10.0, 10.05, 10.1 (sd 0.05, 0.5%) give a half-width of 1.24%; 10.0, 10.02, 10.04
    # (sd 0.02) give 0.50%. The row sum's process medians (6.1, 6.7, 6.2) are far from it.
    assert not pool_precise([[10.0] * 6, [10.05] * 6, [10.1] * 6], 0.0, 0.01, 0.0)
    assert pool_precise([[10.0] * 6, [10.02] * 6, [10.04] * 6], 0.0, 0.01, 0.0)
    assert not pool_precise([[6.1] * 20, [6.7] * 20, [6.2] * 20], 0.0, 0.01, 0.0)
    # A floor in ticks widens the target as it does for one median: three equal 6.25 us medians are within half a
    # tick (0.26%), outside a 0.1% target but inside 1.6 ticks (0.82%).
    assert not pool_precise([[0.00625] * 6] * 3, 3.2e-5, 0.001, 0.0)
    assert pool_precise([[0.00625] * 6] * 3, 3.2e-5, 0.001, 1.6)
