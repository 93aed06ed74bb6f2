"""Multi-turn episodes scored by the live service (real HTTP, real CPU workers); the model is scripted."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import bundled_source, relu_candidate

from gym_client import KernelGymClient
from rl_client.algorithms import DRKERNEL_PR
from rl_client.data import kernelbench_problems, parquet_problems, service_problems
from rl_client.rollout import run_episodes
from rl_client.scoring import ScoreJob, ServiceScorer

RELU = "level1/1_ReLU"


@pytest.fixture
def scorer(stack):
    with KernelGymClient(stack.base_url, timeout=30) as client:
        s = ServiceScorer(client, DRKERNEL_PR, timeout_s=240)
        yield s
        s.close()


def test_turns_are_scored_and_feedback_reaches_the_next_prompt(scorer, problems):
    good = f"Here you go.\n```python\n{bundled_source(RELU)}```"
    wrong = f"```python\n{relu_candidate('return triton_relu(x) * 2.0')}```"
    script = {0: [good, "I am not sure how to do this.", wrong], 1: [good, good, good]}
    turn = {"n": 0}

    def generate(histories):
        answers = script[turn["n"]]
        turn["n"] += 1
        return answers[: len(histories)]

    [problem] = service_problems(scorer.client, [RELU])
    episodes = run_episodes([problem], samples=3, generate=generate, scorer=scorer, max_turns=2)
    first = [ep.turns[0].outcome for ep in episodes]
    assert [o.verdict for o in first] == ["passed", None, "incorrect"]
    assert [o.reward.reward for o in first] == [0.5, 0.0, 0.0]  # CPU: no speedup or coverage
    assert "no ```python```" in first[1].feedback
    assert not any(o.service_fault for o in first)  # an answer without code is the policy's own failure
    assert all(ep.group == RELU for ep in episodes)
    second_prompt = episodes[2].turns[1].prompt
    assert second_prompt[-2]["content"] == wrong and "mismatch" in second_prompt[-1]["content"].lower()
    assert [ep.turns[1].outcome.verdict for ep in episodes] == ["passed"] * 3


def test_a_timed_out_evaluation_is_a_service_fault_and_does_not_stall_the_batch(stack, problems):
    sleepy = relu_candidate("import time\ntime.sleep(60)\nreturn triton_relu(x)")
    slow = f"```python\n{sleepy}```"
    good = f"```python\n{bundled_source(RELU)}```"
    with KernelGymClient(stack.base_url, timeout=30) as client:
        scorer = ServiceScorer(client, DRKERNEL_PR, timeout_s=20)
        jobs = [ScoreJob(RELU, None, slow), ScoreJob(RELU, None, good)]
        outcomes = scorer.score(jobs)
        scorer.close()
    assert outcomes[0].reward.reward == 0.0 and "did not finish" in outcomes[0].feedback
    assert outcomes[0].service_fault  # never judged: a trainer leaves it out
    assert outcomes[1].verdict == "passed" and not outcomes[1].service_fault


def test_problem_sources(tmp_path, problems):
    root = tmp_path / "kb"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_ReLU.py").write_text(problems.load(RELU).source)
    [p] = kernelbench_problems(root)
    assert p.id == RELU and p.inline_reference == p.reference and p.problem_id is None
    with pytest.raises(KeyError, match="nope"):
        kernelbench_problems(root, ["nope"])
    table = pa.table({"uid": ["a", "b"], "reference": [problems.load(RELU).source, ""]})
    pq.write_table(table, tmp_path / "rl.parquet")
    rows = parquet_problems(tmp_path / "rl.parquet", id_column="uid")
    assert [r.id for r in rows] == ["a"]
    with pytest.raises(KeyError, match="columns"):
        parquet_problems(tmp_path / "rl.parquet", reference_column="code")
