"""Timing over placements of large inputs: each placement's calls are a group whose median counts once, and the
stop rule sees the calls' own spread, not the spread between placements (hand-computed)."""

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


def test_each_placements_calls_are_one_group_and_the_time_is_the_mean_of_their_medians():
    timer = _timed([1.0, 1.2, 2.0, 2.1, 1.9, 3.0], [2, 3, 1])
    groups = timer.groups("candidate")
    assert groups == [[1.0, 1.2], [2.0, 2.1, 1.9], [3.0]]
    assert stats.pool(groups).median_ms == pytest.approx((1.1 + 2.0 + 3.0) / 3)


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
