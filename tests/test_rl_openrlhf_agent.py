"""The OpenRLHF agent (`rl_client/openrlhf_agent.py`) driven by OpenRLHF's own multi-turn executor, with the live
service scoring. vLLM needs a GPU, so a scripted engine with vLLM's `generate` interface supplies the answers."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from helpers import bundled_source, char_tokenizer, relu_candidate

pytest.importorskip("openrlhf.utils.agent")

from rl_client import openrlhf_agent

RELU = "level1/1_ReLU"


class ScriptedEngine:
    def __init__(self, tokenizer, answers: list[str]):
        self.tokenizer = tokenizer
        self.answers = list(answers)

    async def generate(self, tokens, sampling_params, multi_modal_data=None):
        text = self.answers.pop(0)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)])


@pytest.fixture
def agent_env(stack, monkeypatch):
    monkeypatch.setenv("KERNELGYM_URL", stack.base_url)
    monkeypatch.setenv("KERNELGYM_RL_MAX_TURNS", "2")
    monkeypatch.setenv("KERNELGYM_RL_TIMEOUT_S", "240")
    monkeypatch.setattr(openrlhf_agent, "_scorer", None)
    yield
    if openrlhf_agent._scorer is not None:
        openrlhf_agent._scorer.close()


def run(label, answers):
    tokenizer = char_tokenizer()
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    executor = openrlhf_agent.AgentExecutor()
    engine = ScriptedEngine(tokenizer, answers)
    return asyncio.run(executor.execute("<user>write a kernel<assistant>", label, params, 100_000, tokenizer, engine))


def test_an_episode_carries_every_turns_reward(agent_env):
    good = f"```python\n{bundled_source(RELU)}```"
    wrong = f"```python\n{relu_candidate('return triton_relu(x) * 2.0')}```"
    out = run(RELU, [good, wrong])
    logs = out["extra_logs"]
    assert logs["num_turns"] == 2.0
    assert logs["turn_reward_1"] == 0.5 and logs["turn_correct_1"] == 1.0
    assert logs["turn_reward_2"] == 0.0 and logs["turn_correct_2"] == 0.0
    assert out["reward"] == pytest.approx(0.5)
    assert len(out["action_ranges"]) == 2
    # The feedback turn sits between the two answers, in the chat format.
    tokenizer = char_tokenizer()
    between = tokenizer.decode(out["observation_tokens"][out["action_ranges"][0][1] : out["action_ranges"][1][0]])
    assert between.startswith("<|im_end|>\n<|im_start|>user\n") and between.endswith("<|im_start|>assistant\n")


def test_inline_reference_label_and_an_answer_without_code(agent_env, problems):
    label = json.dumps({"reference": problems.load(RELU).source})
    out = run(label, ["I will not write code.", f"```python\n{bundled_source(RELU)}```"])
    assert out["extra_logs"]["turn_reward_1"] == 0.0 and out["extra_logs"]["turn_reward_2"] == 0.5
