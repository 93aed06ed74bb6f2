"""bench/kernelbench_step.py end to end on CPU: its own Redis, gateway and worker, an RL step's samples of two
bundled problems (one with its honest kernel, one whose correct samples are the reference through the Triton
copy), each sample getting the verdict of the class it was built for, and each reference timed once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import WORKER_ENV

from services.problems import BUNDLED_PROBLEMS, bundled_kernel

BENCH = Path(__file__).resolve().parents[2] / "bench" / "kernelbench_step.py"


def test_an_rl_step_through_the_service_gives_each_kind_of_sample_its_verdict(tmp_path):
    kernels = tmp_path / "kernels"
    (kernels / "level1").mkdir(parents=True)
    (kernels / "level1" / "1_ReLU.py").write_text(bundled_kernel("level1/1_ReLU").read_text())
    out = tmp_path / "step.json"
    args = ["--device-class", "cpu", "--problems-dir", str(BUNDLED_PROBLEMS), "--problems", "2"]
    args += ["--kernels", str(kernels), "--warm-children", "2", "--json", str(out)]
    # A second mode whose workers time each reference in one process: the settings reach them.
    args += ["--settings", "default;KERNELGYM_CPU_REFERENCE_PROCESSES=1"]
    env = {**os.environ, **WORKER_ENV, "KERNELGYM_CPU_REFERENCE_PROCESSES": "2"}
    done = subprocess.run([sys.executable, str(BENCH), *args], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]

    report = json.loads(out.read_text())
    assert report["ids"] == ["level1/1_ReLU", "level2/1_Linear_Bias_ReLU"]
    row, other = report["rows"]
    assert row["evaluations"] == other["evaluations"] == 12
    assert row["unfinished"] == other["unfinished"] == 0  # no --cut-minutes: every evaluation counted
    assert (
        row["verdicts_by_kind"]
        == other["verdicts_by_kind"]
        == {
            "copy": {"passed": 2},
            "honest": {"passed": 2},
            "incorrect": {"incorrect": 4},
            "no_model_new": {"compile_error": 1},
            "triton_compile_error": {"compile_error": 1},
            "unparsable": {"compile_error": 2},
        }
    )
    assert row["not_passed"] == []
    assert len(row["finished_s"]) == 12 and 0 < row["finished_s"][0] <= row["finished_s"][-1] <= row["wall_s"] + 1
    assert row["problem_check"] == {"problems": 2, "right": 2, "wrong": {}}
    assert row["requests"]["candidate.call"]["s_mean_passed"] > 0  # what a passed evaluation spent, by request
    shares = row["stage_share"]
    assert shares["correctness"] > 0 and shares["timing"] > 0 and shares["other"] >= 0, shares
    first_n = report["summary"]["first_n_per_minute"]
    assert first_n == {"n": 12} | {r["mode"]: round(720 / r["finished_s"][-1], 2) for r in (row, other)}
    modes = report["summary"]["modes"]
    assert {mode: m["vs_one_gpu"] for mode, m in modes.items()} == {
        "step-gpus-1-settings-0": 1.0,
        "step-gpus-1-settings-1": 1.0,
    }
    assert modes["step-gpus-1-settings-1"]["settings"] == "KERNELGYM_CPU_REFERENCE_PROCESSES=1"
    # No speedup on CPU, so no side's placements to count.
    assert modes["step-gpus-1-settings-0"]["placements"] == {"sides": 0, "fastest": [], "slower_by_5pct": []}
    # Every evaluation's time on the device, from the worker's log: held, by requests alone, or free.
    device = modes["step-gpus-1-settings-0"]["device"]
    shares = [device[k] for k in ("measurement", "requests_only", "free")]
    assert device["span_s"] > 0 and all(0 <= x <= 1 for x in shares) and abs(sum(shares) - 1) <= 0.01, device
    # Each problem's reference is timed in full once, in two processes, while its other correct sample waits.
    fresh = row["new_references"]
    assert (fresh["problems"], fresh["timed_more_than_once"], fresh["processes"]) == (2, [], {"2": 2}), fresh
    assert 0 < fresh["more_processes_s"]["median"] <= fresh["whole_hold_s"]["median"], fresh
    calls = fresh["reference_calls_s"]
    assert 0 < calls["median"] <= calls["max"] and set(calls["over_target"]) <= set(report["ids"]), fresh
    assert other["new_references"] == {"evaluations": 0}  # one process: none timed in more
    further, alone = modes["step-gpus-1-settings-0"], modes["step-gpus-1-settings-1"]
    assert 0 <= further["reference_waits_s"] <= further["reference_starts_s"] and alone["reference_starts_s"] is None

    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line.get("mode") for line in lines[1:-1]] == list(modes) and "summary" in lines[-1]
    assert lines[1]["unexpected_verdicts"] == [] and lines[1]["per_minute"] > 0


def test_a_cut_before_any_evaluation_finished_says_so_rather_than_reporting_a_rate(tmp_path):
    args = ["--device-class", "cpu", "--problems-dir", str(BUNDLED_PROBLEMS), "--problems", "1", "--samples", "3"]
    args += ["--warm-children", "1", "--cut-minutes", "0.0001", "--json", str(tmp_path / "step.json")]
    env = {**os.environ, **WORKER_ENV}
    done = subprocess.run([sys.executable, str(BENCH), *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "no evaluation finished within the cut of 0.006 s" in done.stderr


def test_abba_runs_the_modes_again_in_reverse_and_the_summary_averages_each_ones_rate(monkeypatch):
    # Two minutes of a step moved by about 10% between runs on one H100 and with the modes' order: more than the
    # settings it compared. A B B A weighs drift and order on both alike.
    monkeypatch.syspath_prepend(str(BENCH.parent))
    from kernelbench_step import mean_rates, mode_plan

    default, four = {}, {"KERNELGYM_WORKER_CONCURRENCY": "4"}
    plan = mode_plan([1], [default, four], abba=True)
    assert [(name, gpus) for name, gpus, _ in plan] == [
        ("step-gpus-1-settings-0", 1),
        ("step-gpus-1-settings-1", 1),
        ("step-gpus-1-settings-1-again", 1),
        ("step-gpus-1-settings-0-again", 1),
    ]
    assert [extra for _, _, extra in plan] == [default, four, four, default]
    assert [name for name, _, _ in mode_plan([1, 4], [default], abba=False)] == ["step-gpus-1", "step-gpus-4"]
    rows = [
        {"gpus": 1, "settings": "default", "per_minute": 26.0},
        {"gpus": 1, "settings": "KERNELGYM_WORKER_CONCURRENCY=4", "per_minute": 30.0},
        {"gpus": 1, "settings": "KERNELGYM_WORKER_CONCURRENCY=4", "per_minute": 25.0},
        {"gpus": 1, "settings": "default", "per_minute": 29.0},
    ]
    assert mean_rates(rows) == {"gpus=1 default": 27.5, "gpus=1 KERNELGYM_WORKER_CONCURRENCY=4": 27.5}


def test_an_interleaved_step_sends_one_sample_of_every_problem_in_turn(monkeypatch):
    # A step's groups sent as they are made put a problem's samples side by side on the workers (its new reference,
    # its memory); `--order interleaved` measures the other way.
    monkeypatch.syspath_prepend(str(BENCH.parent))
    from kernelbench_step import step_batch

    from gym_client import KernelGymClient

    problems = [
        {"label": name, "reference": f"# {name}\n", "candidate": f"# {name} kernel\n", "honest": True}
        for name in ("a", "b")
    ]
    grouped = [label for label, _ in step_batch(KernelGymClient, problems, 3)]
    assert grouped == [
        "a [honest]",
        "a [incorrect]",
        "a [unparsable]",
        "b [honest]",
        "b [incorrect]",
        "b [no_model_new]",
    ]
    turns = [label for label, _ in step_batch(KernelGymClient, problems, 3, "interleaved")]
    assert turns == ["a [honest]", "b [honest]", "a [incorrect]", "b [incorrect]", "a [unparsable]", "b [no_model_new]"]
