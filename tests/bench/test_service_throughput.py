"""bench/service_throughput.py on a problem folder and its kernel folder, end to end on CPU (its own Redis,
gateway and worker): `--problems DIR --kernels DIR --only PATTERNS` sends just the chosen problems, each with its
honest kernel and its reference inline, and the mode's row counts the verdicts by problem, so that "0 rejected of
40" can be read off a GPU run (issue 35)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import WORKER_ENV

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "service_throughput.py"


def test_the_calibration_problems_chosen_by_only_each_get_their_verdicts_counted():
    args = ["--device-class", "cpu", "--serial", "0", "--pipelined", "2", "--warm-children", "2"]
    args += ["--problems", str(ROOT / "bench" / "problems" / "calibration")]
    args += ["--kernels", str(ROOT / "bench" / "kernels" / "calibration"), "--only", "row_argmax,inplace_*"]
    env = {**os.environ, **WORKER_ENV}
    done = subprocess.run([sys.executable, str(BENCH), *args], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]

    head, row, summary = (json.loads(line) for line in done.stdout.splitlines())
    assert head["problems"] == 2 and "summary" in summary
    assert row["mode"] == "pipelined-default" and row["evaluations"] == 4
    assert row["verdicts_by_problem"] == {"inplace_axpy": {"passed": 2}, "row_argmax": {"passed": 2}}
    assert row["verdicts"] == {"passed": 4} and row["not_passed"] == []


def test_stage_shares_count_the_waits_for_device_memory_and_the_attempts_started_again(monkeypatch):
    # On one H100, 9 of 51 evaluations of a KernelBench step started again; their first attempts and waits were 41%
    # of the worker's time and no stage's share showed them.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import stage_shares

    phases = {"total": 5.0, "timing": 3.0, "correctness": 1.5, "closing": 1.0, "memory_wait": 1.0}
    phases["earlier_attempts"] = 3.0
    assert stage_shares([{"phases": phases}, {"phases": {"total": 0.0}}]) == {
        "correctness": 0.15,
        "timing": 0.3,
        "closing": 0.1,
        "memory_wait": 0.1,
        "earlier_attempts": 0.3,
        "other": 0.05,
        "evaluations_s": 10.0,
    }


def test_by_verdict_gives_each_verdicts_count_median_total_and_own_stage_shares(monkeypatch):
    # A KernelBench step's failures take 1-2 s and its passes ~7 s: one mix of shares hid which of them timing cost.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import by_verdict

    passed = [{"verdict": "passed", "phases": {"total": t, "timing": t / 2}} for t in (4.0, 6.0, 8.0)]
    failed = [{"verdict": "incorrect", "phases": {"total": 1.0, "correctness": 0.25, "closing": 0.5}}]
    assert by_verdict(passed + failed) == {
        "incorrect": {
            "n": 1,
            "total_median_s": 1.0,
            "whole_mean_s": 1.5,
            "stage_share": {"correctness": 0.1667, "closing": 0.3333, "other": 0.5, "evaluations_s": 1.5},
        },
        "passed": {
            "n": 3,
            "total_median_s": 6.0,
            "whole_mean_s": 6.0,
            "stage_share": {"timing": 0.5, "other": 0.5, "evaluations_s": 18.0},
        },
    }


def test_worker_seconds_give_each_verdicts_mean_time_in_the_evaluator_and_storing(monkeypatch):
    # On one H200 a compile error's evaluation took 0.57 s of its worker against 0.05 s of stages: the worker's own
    # figures show what the phases leave out.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import worker_seconds

    entries = [
        {"verdict": "compile_error", "evaluate_s": 0.5, "store_s": 0.01},
        {"verdict": "compile_error", "evaluate_s": 0.25, "store_s": 0.03},
        {"verdict": None, "status": "failed", "evaluate_s": 2.0, "store_s": 0.5},
        {"verdict": "passed", "timing_slot_held_s": 1.0},  # a worker of before the figures: left out
    ]
    assert worker_seconds(entries) == {
        "compile_error": {"n": 2, "evaluate_s_mean": 0.375, "store_s_mean": 0.02},
        "failed": {"n": 1, "evaluate_s_mean": 2.0, "store_s_mean": 0.5},
    }


def test_slow_placements_count_by_order_which_placement_was_fastest_and_which_over_5pct_slower(monkeypatch):
    # On 2 x H200 the second placement was the slow one in 71 of 179 sides: counted by order, that shows at a glance.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import slow_placements

    timings = {
        "p [honest]": [{"reference": [3.04, 9.41, 3.05], "candidate": [1.0, 1.02, 0.99], "reused": []}],
        "q [copy]": [{"reference": [2.0], "candidate": [7.2, 7.6, 6.1], "reused": ["reference"]}],
    }
    # Sides over placements: 3.04/9.41/3.05 (fastest 1st, 2nd slow), 1.0/1.02/0.99 (fastest 3rd, none 5% slower),
    # 7.2/7.6/6.1 (fastest 3rd, 1st and 2nd slow); the one-placement reference is left out.
    assert slow_placements(timings) == {"sides": 3, "fastest": [1, 0, 2], "slower_by_5pct": [1, 2, 0]}


def test_a_new_references_timed_calls_count_against_2_s_or_1_s_under_1_ms_a_call(monkeypatch):
    # Issue 34's target: a new reference timed in at most 2 s of device time, 1 s where a call takes under 1 ms.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import new_references

    def timed(median_ms: float, calls_s: float) -> dict:
        runtime = {"median_ms": median_ms, "mean_ms": median_ms, "trials": 100, "processes": 3}
        phases = {"timing_reference_processes": 0.5, "timing_reference_calls": calls_s}
        return {"reference_runtime": runtime, "timings_from_cache": [], "phases": phases}

    fresh = new_references(
        [
            ("level1/19_ReLU [honest]", timed(3.0, 1.8)),  # within 2 s
            ("level1/88_Gelu [copy]", timed(0.5, 1.2)),  # over 1 s, its call under 1 ms
            ("level1/36_RMSNorm [copy]", timed(14.0, 2.1)),  # over 2 s
        ]
    )
    assert fresh["reference_calls_s"] == {
        "median": 1.8,
        "max": 2.1,
        "over_target": {"level1/36_RMSNorm": 2.1, "level1/88_Gelu": 1.2},
    }


def test_device_engagement_splits_each_workers_span_into_measurement_requests_alone_and_free(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import device_engagement, union_s

    assert union_s([(5.0, 6.0), (0.0, 2.0), (1.0, 3.0), (5.5, 5.7)]) == 4.0
    slot = [
        # Worker a over 0-6 s: a measurement 0-2 s, requests 1-3 s and 5-6 s; held 2 s, busy 4 s, free 2 s.
        {"worker": "a", "gpu_busy": [[0.0, 2.0, "measurement"], [1.0, 3.0, "x"]]},
        {"worker": "a", "gpu_busy": [[5.0, 6.0, "y"]]},
        # Worker b over 10-14 s: a request 10-11 s, then a measurement 11-14 s; never free.
        {"worker": "b", "gpu_busy": [[10.0, 11.0, "x"], [11.0, 14.0, "measurement"]]},
        {"worker": "b"},  # an evaluation that never reached the device
    ]
    # Shares (a, b): measurement 1/3 and 3/4, requests alone 1/3 and 1/4, free 1/3 and 0; their means.
    assert device_engagement(slot) == {
        "measurement": 0.542,
        "requests_only": 0.292,
        "free": 0.167,
        "span_s": 10.0,
        "request_s": {"x": 3.0, "y": 1.0},
    }
    assert device_engagement([{"worker": "a"}]) == {}


def test_placement_neighbours_sets_slow_and_fast_placements_beside_the_children_started_and_ended(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import placement_neighbours

    slot = [
        # Worker a: a child started over 1-2 s and one ended over 4-5 s (logged by another evaluation).
        {
            "worker": "a",
            "placement_windows": [
                ["reference", 0.0, 0.9, 1.0],  # fast, beside nothing
                ["reference", 1.5, 2.5, 2.0],  # slow (twice the fastest), beside the start
                ["reference", 4.5, 5.5, 1.04],  # fast (4% over), beside the end
                ["candidate", 1.0, 4.6, 3.0],  # its one placement: fast, beside both
            ],
        },
        {"worker": "a", "child_events": [["start", 1.0, 2.0], ["end", 4.0, 5.0]]},
        # Worker b's placement overlaps a's events in time but not its GPU.
        {"worker": "b", "placement_windows": [["candidate", 1.0, 2.0, 1.0], ["candidate", 2.0, 3.0, 1.2]]},
    ]
    assert placement_neighbours(slot) == {
        "slow": {"neither": 1, "start": 1},
        "fast": {"end": 1, "end+start": 1, "neither": 2},
    }
    assert placement_neighbours([{"worker": "a"}]) == {"slow": {}, "fast": {}}


def test_gpu_children_counts_the_children_gone_a_second_and_per_evaluation_but_not_the_stretches_of_starts(
    monkeypatch,
):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from service_throughput import gpu_children

    slot = [
        # One child's start in two stretches (around a measurement), then two children gone, on two workers.
        {"worker": "a", "child_events": [["start", 0.0, 1.0], ["start", 2.0, 3.0], ["end", 3.0, 3.4]]},
        {"worker": "b", "child_events": [["end", 5.0, 5.2]]},
        {"worker": "a"},
        {"worker": "b"},
    ]
    # Events over 0-5.2 s: 2 ends, 2 / 5.2 a second, 2 over 4 evaluations; ends took 0.4 and 0.2 s.
    assert gpu_children(slot) == {"ended": 2, "ended_per_s": 0.38, "per_evaluation": 0.5, "end_median_s": 0.3}
    assert gpu_children([{"worker": "a", "child_events": [["start", 0.0, 1.0]]}]) == {}


def test_first_n_rates_time_every_mode_over_as_many_evaluations_as_the_one_that_counted_fewest(monkeypatch):
    # A cut counts whole evaluations: modes that differ by less than the one straddling it count the same number,
    # while the time each took for the same number still differs.
    monkeypatch.syspath_prepend(str(BENCH.parent))
    from service_throughput import first_n_rates

    rows = [{"mode": "a", "finished_s": [1.0, 2.0, 3.0]}, {"mode": "b", "finished_s": [2.5, 4.0]}]
    assert first_n_rates(rows) == {"n": 2, "a": 60.0, "b": 30.0}  # 2 in 2 s, 2 in 4 s
