"""Model evaluation: the metrics on hand-made outcomes, and `kernelgym-rl evaluate` end to end against the live
service with a scripted OpenAI-compatible model server (the model is the only stand-in)."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from helpers import bundled_source, relu_candidate, serving

from rl_client.algorithms.rewards import DRKERNEL_PR, turn_reward
from rl_client.cli import main
from rl_client.data import Problem
from rl_client.model_eval import best_outcome, summarize
from rl_client.rollout import Episode, Turn
from rl_client.scoring import TurnOutcome


def outcome(verdict: str | None, speedup: float | None = None, coverage: float | None = None) -> TurnOutcome:
    return TurnOutcome(
        turn_reward(DRKERNEL_PR, verdict, speedup, coverage), verdict, verdict == "passed", speedup, coverage, ""
    )


def test_fast_p_counts_only_correct_samples_faster_than_p():
    s = summarize(
        [
            outcome("passed", 2.5, 0.9),
            outcome("passed", 1.1, 0.5),
            outcome("passed"),
            outcome("rejected", 50.0),
            outcome("incorrect"),
            outcome(None),
        ]
    )
    assert s["samples"] == 6 and s["correct"] == pytest.approx(3 / 6)
    assert s["fast_p"] == pytest.approx({"1.0": 2 / 6, "1.2": 1 / 6, "1.5": 1 / 6, "2.0": 1 / 6})
    assert s["geomean_speedup"] == pytest.approx((2.5 * 1.1) ** 0.5)
    assert s["mean_coverage"] == pytest.approx(0.7) and s["rejected"] == pytest.approx(1 / 6)
    assert summarize([])["correct"] == 0.0 and summarize([outcome("incorrect")])["geomean_speedup"] is None


def test_best_of_turns_is_the_fastest_correct_turn_else_the_last():
    ep = Episode(Problem(id="p", reference="r"), group="p")
    for o in (outcome("passed", 1.2), outcome("passed", 3.0), outcome("incorrect")):
        ep.turns.append(Turn([], "", o))
    assert best_outcome(ep).speedup == 3.0
    failed = Episode(
        Problem(id="p", reference="r"),
        group="p",
        turns=[Turn([], "", outcome("incorrect")), Turn([], "", outcome("rejected"))],
    )
    assert best_outcome(failed).verdict == "rejected"


@pytest.fixture
def model_server():
    """Answers wrongly on a first turn and with the bundled ReLU kernel once it has seen feedback."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def complete(body: dict) -> dict:
        seen_feedback = any(m["role"] == "assistant" for m in body["messages"])
        code = bundled_source("level1/1_ReLU") if seen_feedback else relu_candidate("return triton_relu(x) * 2.0")
        return {"choices": [{"message": {"role": "assistant", "content": f"```python\n{code}```"}}]}

    with serving(app) as url:
        yield url + "/v1"


def test_evaluate_reports_per_turn_and_best_of_turns(stack, model_server, tmp_path, capsys):
    out = tmp_path / "eval.json"
    args = [
        "evaluate",
        "--model-url",
        model_server,
        "--model",
        "scripted",
        "--service",
        stack.base_url,
        "--problems",
        "level1/1_ReLU",
        "--samples",
        "2",
        "--turns",
        "2",
        "--out",
        str(out),
        "--plot",
        str(tmp_path / "eval.png"),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "best of turns" in printed and "kernelgym-eval/2" in printed
    data = json.loads(out.read_text())
    rep = data["report"]
    assert [t["correct"] for t in rep["per_turn"]] == [0.0, 1.0]
    assert rep["best_of_turns"]["correct"] == 1.0 and rep["best_of_turns"]["rejected"] == 0.0
    assert rep["best_of_turns"]["fast_p"]["1.0"] == 0.0  # a CPU service measures no speedup
    assert rep["gpu"] == "cpu" and rep["generation_failures"] == 0
    assert (tmp_path / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [(t["turn"], t["verdict"]) for t in data["turns"]] == [(0, "incorrect"), (1, "passed")] * 2


def test_sequential_scaling_restarts_each_window_from_the_best_turn(stack, model_server, tmp_path, capsys):
    out = tmp_path / "scaling.json"
    args = ["evaluate", "--model-url", model_server, "--model", "scripted", "--service", stack.base_url]
    args += ["--problems", "level1/1_ReLU", "--turns", "1", "--iterations", "2", "--out", str(out)]
    assert main(args) == 0
    assert "best after iteration 2" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [s["correct"] for s in data["report"]["per_iteration"]] == [0.0, 1.0]
    # The second window holds the carried-over best turn of the first (seen as history) and one new turn.
    assert [(t["iteration"], t["turn"], t["verdict"]) for t in data["turns"]] == [
        (0, 0, "incorrect"),
        (1, 0, "incorrect"),
        (1, 1, "passed"),
    ]
