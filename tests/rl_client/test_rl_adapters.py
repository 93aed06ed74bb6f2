"""The reward adapters for other RL frameworks, each driven against the live service (real HTTP, real CPU
workers): TRL's reward function called directly, and OpenRLHF's remote-reward protocol. TRL's and verl's own
classes drive the adapters in test_rl_frameworks.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
import redis
from helpers import bundled_source, relu_candidate, serving, unique

from rl_client.adapters.common import LabelError, job_from_label
from rl_client.adapters.openrlhf_reward import create_app, response_text
from rl_client.adapters.trl import KernelGymReward, completion_text
from rl_client.prompts import first_turn
from rl_client.settings import RLSettings

RELU = "level1/1_ReLU"


def good_answer() -> str:
    return f"Here is the kernel.\n```python\n{unique(bundled_source(RELU))}```"


WRONG = f"```python\n{relu_candidate('return triton_relu(x) * 2.0')}```"


# -- labels ------------------------------------------------------------------------------------------------
def test_a_label_is_a_problem_id_a_reference_or_json(problems):
    reference = problems.load(RELU).source
    assert job_from_label(RELU, "a").problem_id == RELU
    assert job_from_label(reference, "a").reference == reference
    assert job_from_label(json.dumps({"problem_id": RELU}), "a").problem_id == RELU
    assert job_from_label({"reference": reference}, "a").reference == reference


@pytest.mark.parametrize("label", ["", "{broken", {"problem_id": RELU, "reference": "x"}, {}, 7, None])
def test_a_label_that_names_nothing_is_a_clear_error(label):
    with pytest.raises(LabelError, match="label"):
        job_from_label(label, "answer")


# -- TRL ---------------------------------------------------------------------------------------------------
def test_trl_reward_scores_a_batch_of_plain_and_conversational_completions(stack):
    reward = KernelGymReward(url=stack.base_url, label_column="problem_id", timeout_s=240)
    try:
        completions = [good_answer(), WRONG, [{"role": "assistant", "content": good_answer()}], "no code here"]
        rewards = reward(["p"] * 4, completions, problem_id=[RELU] * 4, other_column=[0, 1, 2, 3])
    finally:
        reward.close()
    assert rewards == [0.5, 0.0, 0.5, 0.0]  # CPU: correct, but no speedup or coverage is measured
    assert [o["verdict"] for o in reward.last_outcomes] == ["passed", "incorrect", "passed", None]
    assert reward.__name__ == "kernelgym_drkernel-pr"


def test_trl_reward_names_a_missing_label_column(stack):
    reward = KernelGymReward(url=stack.base_url)
    try:
        with pytest.raises(KeyError, match="label_column"):
            reward(["p"], [good_answer()], problem_id=[RELU])
    finally:
        reward.close()


def test_a_completion_of_another_type_is_refused():
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]) == "a"
    with pytest.raises(TypeError):
        completion_text(42)


# -- verl: driven through verl's own reward loop, reward managers and agent loop in test_rl_frameworks.py ------


# -- OpenRLHF ----------------------------------------------------------------------------------------------
@pytest.fixture
def reward_server(stack) -> Iterator:
    """The OpenRLHF reward app on a real port; `answer_within_s` short enough to see the 504 path."""
    with ExitStack() as stack_of_servers:

        def start(answer_within_s: float) -> str:
            app = create_app(RLSettings(url=stack.base_url), answer_within_s=answer_within_s)
            stack_of_servers.callback(app.state.scorer.close)
            return stack_of_servers.enter_context(serving(app))

        yield start


def openrlhf_body(problems, answers: list[str]) -> dict:
    prompt = first_turn(problems.load(RELU).source)
    return {"query": [prompt + a for a in answers], "prompts": [prompt] * len(answers), "labels": [RELU] * len(answers)}


def test_openrlhf_remote_reward_protocol(reward_server, problems):
    url = reward_server(240)
    r = httpx.post(url + "/get_reward", json=openrlhf_body(problems, [good_answer(), WRONG]), timeout=300)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == [0.5, 0.0] and body["scores"] == body["rewards"]
    assert body["extra_logs"]["correct"] == [1.0, 0.0]


def test_openrlhf_retry_after_a_504_attaches_to_the_running_evaluation(reward_server, problems, stack):
    url = reward_server(0.2)
    jobs = redis.Redis.from_url(stack.redis_url)
    before = len(list(jobs.scan_iter(match="kg:job:*")))
    body = openrlhf_body(problems, [good_answer()])
    first = httpx.post(url + "/get_reward", json=body, timeout=60)
    assert first.status_code == 504 and "send the same request again" in first.json()["detail"]
    deadline = time.monotonic() + 240
    while (r := httpx.post(url + "/get_reward", json=body, timeout=60)).status_code == 504:
        assert time.monotonic() < deadline
        time.sleep(1)
    assert r.status_code == 200 and r.json()["rewards"] == [0.5]
    assert len(list(jobs.scan_iter(match="kg:job:*"))) == before + 1  # the retries ran nothing new


def test_openrlhfs_own_http_reward_client_gets_the_reward_through_504_retries(reward_server, problems):
    """OpenRLHF's SingleTurnAgentExecutor._fetch_rewards_via_http (0.11.2) against the server: its 1 s retries
    re-attach to the running evaluation after each 504 until the reward is there."""
    import asyncio
    import itertools
    from types import SimpleNamespace

    executor_cls = pytest.importorskip("openrlhf.utils.agent").SingleTurnAgentExecutor
    url = reward_server(3.0) + "/get_reward"
    executor = SimpleNamespace(reward_endpoints=[url], _reward_endpoint_cycle=itertools.cycle([url]))
    body = openrlhf_body(problems, [good_answer()])
    fetch = executor_cls._fetch_rewards_via_http(executor, body["query"], body["prompts"], body["labels"])
    [info] = asyncio.run(fetch)
    assert info["rewards"] == [0.5] and info["extra_logs"]["correct"] == [1.0]


def test_openrlhf_bad_requests_get_a_clear_422(reward_server):
    url = reward_server(240)
    r = httpx.post(url + "/get_reward", json={"query": ["a"], "prompts": [], "labels": [RELU]}, timeout=30)
    assert r.status_code == 422
    r = httpx.post(url + "/get_reward", json={"query": ["a"], "prompts": ["a"], "labels": ["{oops"]}, timeout=30)
    assert r.status_code == 422 and "label" in r.json()["detail"]


def test_the_response_is_what_follows_the_prompt():
    assert response_text("PROMPT answer", "PROMPT ") == "answer"
    assert response_text("re-rendered answer", "PROMPT ") == "re-rendered answer"
