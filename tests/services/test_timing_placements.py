"""Timing over placements of large inputs: each placement's calls are a group, the fastest group's median is the
time, the stop rule sees the calls' own spread, not the spread between placements, and a slow placement's calls
bear on neither (hand-computed)."""

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


def test_the_fastest_placements_interval_is_the_calls_precision_over_the_placements_it_rests_on():
    # Calls move on after their share, so the fastest placement may hold four, one of them slow (as on an H200: a
    # 1.45 ms kernel reported a half-width of 7.5 times its median). Scaled to 1.70, the 24 calls are 23 of 1.70
    # and the slow one; ranks 7 and 18 of 24 bound the median: (1.70, 1.70).
    runtime = stats.fastest_placement([[1.70, 1.70, 1.70, 23.0], [1.75] * 10, [1.78] * 10])
    assert runtime.median_ms == pytest.approx(1.70)
    assert (runtime.ci95_low_ms, runtime.ci95_high_ms) == pytest.approx((1.70, 1.70))
    assert runtime.ci95_rel_halfwidth == pytest.approx(0.0, abs=1e-12)
    assert runtime.trials == 24 and runtime.iqr_ms > 5  # the spread is the fastest placement's own


def test_a_slow_placements_calls_count_towards_neither_the_time_nor_its_precision():
    # The second placement 3.2 times the others (as RMSNorm's reference on an H200: 11.40, 36.3, 11.41 ms) and its
    # calls spread; the others' six calls agree to 0.1%.
    groups = [[11.40, 11.41, 11.40], [30.0, 42.6, 36.3], [11.41, 11.40, 11.41]]
    assert stats.is_slow_placement(groups, 1) and not stats.is_slow_placement(groups, 2)
    assert stats.bearing_placements(groups) == [groups[0], groups[2]]
    runtime = stats.fastest_placement(groups)
    assert runtime.median_ms == pytest.approx(11.40)
    # Six calls, scaled to 11.40: 11.40, 11.41, 11.40; 11.40, 11.39, 11.40. Their range bounds the median.
    assert (runtime.ci95_low_ms, runtime.ci95_high_ms) == pytest.approx((11.40 * 11.40 / 11.41, 11.41))
    assert runtime.trials == 9 and runtime.process_medians_ms == pytest.approx([11.40, 36.3, 11.41])
    timer = _timed([x for g in groups for x in g], [3, 3, 3])
    assert stats.precise_enough(timer._within("candidate"), 3.2e-5, 0.01, 1.6)


def test_the_last_placement_bears_on_the_precision_while_it_is_slow():
    groups = [[1.0, 1.0, 1.0], [2.0, 3.0, 2.5]]
    assert stats.bearing_placements(groups) == groups
    assert not stats.precise_enough(_timed([1.0] * 3 + [2.0, 3.0, 2.5], [3, 3])._within("candidate"), 3.2e-5, 0.01, 1.6)


@pytest.mark.parametrize(
    ("per_placement", "moves"),
    [
        ([2], True),  # its share made, placements still to visit
        ([1], False),  # not yet its share
        ([2, 2, 2], False),  # every placement visited, the last as fast as the first
        ([2, 2, 2, 2], True),  # the fourth (a spare) slow: another
        ([2, 2, 2, 2, 2], False),  # both spares taken
    ],
)
def test_a_side_leaves_a_slow_placement_for_a_spare_one(per_placement: list[int], moves: bool):
    medians = [1.0, 1.0, 1.0, 3.0, 3.0][: len(per_placement)]
    timer = _timed([m for m, n in zip(medians, per_placement, strict=True) for _ in range(n)], per_placement)
    timer.placements = 3
    assert timer._moves_on("candidate", share=2) is moves


def test_the_stop_rule_sees_each_placements_calls_scaled_to_the_mean_of_the_medians():
    # Placements 2.5% apart with no spread inside each: the calls are as precise as they can be, and more of them in
    # the last placement would not narrow the difference between placements.
    timer = _timed([0.80] * 4 + [0.82] * 4 + [0.80] * 4, [4, 4, 4])
    center = (0.80 + 0.82 + 0.80) / 3
    assert timer._within("candidate") == pytest.approx([center] * 12)
    assert stats.precise_enough(timer._within("candidate"), 3.2e-5, 0.01, 1.6)
    assert not stats.precise_enough(timer.samples["candidate"], 3.2e-5, 0.01, 1.6)


def test_one_placement_is_judged_on_its_calls_as_they_are():
    timer = _timed([1.0, 1.1, 0.9], [3])
    assert timer.groups("candidate") == [[1.0, 1.1, 0.9]]
    assert timer._within("candidate") == [1.0, 1.1, 0.9]
