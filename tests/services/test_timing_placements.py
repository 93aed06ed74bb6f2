"""Timing over placements of large inputs: each placement's calls are a group, the fastest group's median is the
time, and the stop rule sees the calls' own spread, not the spread between placements (hand-computed)."""

from __future__ import annotations

import pytest

from services import stats
from services.parent.timing import _Timer


def _timed(samples: list[float], per_placement: list[int]) -> _Timer:
    """A timer's record of one side's kept calls, as sampling leaves it (no child needed to read it back)."""
    timer = _Timer.__new__(_Timer)
    timer.samples = {"candidate": samples}
    timer.per_placement = {"candidate": per_placement}
    return timer


def test_each_placements_calls_are_one_group_and_the_time_is_the_fastest_placements_median():
    timer = _timed([1.0, 1.2, 2.0, 2.1, 1.9, 3.0], [2, 3, 1])
    groups = timer.groups("candidate")
    assert groups == [[1.0, 1.2], [2.0, 2.1, 1.9], [3.0]]
    runtime = stats.fastest_placement(groups)
    assert runtime.median_ms == pytest.approx(1.1)
    # Every call scaled to the fastest median 1.1: 1.0, 1.2; 1.1, 1.155, 1.045; 1.1. Six calls: their range.
    assert (runtime.ci95_low_ms, runtime.ci95_high_ms) == pytest.approx((1.0, 1.2))
    assert runtime.trials == 6 and runtime.processes == 3
    assert runtime.process_medians_ms == pytest.approx([1.1, 2.0, 3.0])


def test_a_slow_placement_does_not_move_the_time():
    # As measured on a host of four busy H100s: an ELU reference at KernelBench's published size took 4.27 ms in
    # two placements and 43 ms in the third; their mean (17.2 ms) would have been four times its time.
    groups = [[4.27, 4.28, 4.27], [43.0, 43.1, 42.9], [4.28, 4.27, 4.28]]
    assert stats.fastest_placement(groups).median_ms == pytest.approx(4.27)
    assert stats.pool(groups).median_ms == pytest.approx((4.27 + 43.0 + 4.28) / 3)


def test_the_fastest_placements_interval_is_the_calls_precision_over_every_placement():
    # Calls move on after their share, so the fastest placement may hold four, one of them slow (as on an H200: a
    # 1.45 ms kernel reported a half-width of 7.5 times its median). Scaled to 1.70, the 24 calls are 23 of 1.70
    # and the slow one; ranks 7 and 18 of 24 bound the median: (1.70, 1.70).
    runtime = stats.fastest_placement([[1.70, 1.70, 1.70, 23.0], [1.80] * 10, [1.90] * 10])
    assert runtime.median_ms == pytest.approx(1.70)
    assert (runtime.ci95_low_ms, runtime.ci95_high_ms) == pytest.approx((1.70, 1.70))
    assert runtime.ci95_rel_halfwidth == pytest.approx(0.0, abs=1e-12)
    assert runtime.trials == 24 and runtime.iqr_ms > 5  # the spread is the fastest placement's own


def test_the_stop_rule_sees_each_placements_calls_scaled_to_the_mean_of_the_medians():
    # Placements 25% apart with no spread inside each: the calls are as precise as they can be, and more of them in
    # the last placement would not narrow the difference between placements.
    timer = _timed([0.8] * 4 + [1.0] * 4 + [0.8] * 4, [4, 4, 4])
    center = (0.8 + 1.0 + 0.8) / 3
    assert timer._within("candidate") == pytest.approx([center] * 12)
    assert stats.precise_enough(timer._within("candidate"), 3.2e-5, 0.01, 1.6)
    assert not stats.precise_enough(timer.samples["candidate"], 3.2e-5, 0.01, 1.6)


def test_one_placement_is_judged_on_its_calls_as_they_are():
    timer = _timed([1.0, 1.1, 0.9], [3])
    assert timer.groups("candidate") == [[1.0, 1.1, 0.9]]
    assert timer._within("candidate") == [1.0, 1.1, 0.9]
