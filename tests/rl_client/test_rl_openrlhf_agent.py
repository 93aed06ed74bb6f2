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


PROMPT = "<user>write a kernel<assistant>"


def run(label, answers, max_length=100_000):
    tokenizer = char_tokenizer()
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    executor = openrlhf_agent.AgentExecutor()
    engine = ScriptedEngine(tokenizer, answers)
    return asyncio.run(executor.execute(PROMPT, label, params, max_length, tokenizer, engine))


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


def test_an_episode_cut_short_still_reports_every_turn(agent_env):
    # Room for the first answer but not for the feedback after it: OpenRLHF's executor stops after one turn.
    good = f"```python\n{bundled_source(RELU)}```"
    out = run(RELU, [good], max_length=len(PROMPT) + len(good) + 10)
    logs = out["extra_logs"]
    assert logs["num_turns"] == 1.0 and len(out["action_ranges"]) == 1
    assert logs["turn_reward_1"] == 0.5
    assert (logs["turn_reward_2"], logs["turn_correct_2"], logs["turn_coverage_2"]) == (0.0, 0.0, -1.0)


def test_episodes_become_turn_level_advantages_in_openrlhfs_experience_maker(agent_env, monkeypatch):
    """Two episodes of one prompt from OpenRLHF's executor and the live service, turned into a batch by OpenRLHF's
    own experience code (compiled from its files, see openrlhf_source.py), then TRLOO."""
    from openrlhf_source import parse_train_ppo_ray, response_to_experience, split_rollout_samples

    from rl_client.openrlhf_train import SETTINGS_ENV, TrainerSettings, rewrite_arguments
    from rl_client.openrlhf_trloo import compute_advantages_and_returns
    from rl_client.turn_tokens import turn_spans

    good = f"```python\n{bundled_source(RELU)}```"
    wrong = f"```python\n{relu_candidate('return triton_relu(x) * 2.0')}```"
    responses = [run(RELU, [good, good]), run(RELU, [wrong, wrong])]
    command = [
        "--actor.model_name_or_path", "model", "--train.agent_func_path", "rl_client/openrlhf_agent.py",
        "--algo.advantage.estimator", "trloo", "--algo.kl.init_coef", "0", "--kernelgym.token_veto", "0",
        "--rollout.batch_size", "1", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "2",
        "--vllm.num_engines", "1", "--actor.num_gpus_per_node", "1",
    ]  # fmt: skip
    launch = rewrite_arguments(command)
    args = parse_train_ppo_ray(launch.openrlhf_argv)
    [experience] = split_rollout_samples([response_to_experience(r, max_len=100_000) for r in responses], args)
    spans = turn_spans(experience.action_mask)
    monkeypatch.setenv(SETTINGS_ENV, launch.settings.to_json())
    assert launch.settings == TrainerSettings(estimator="trloo", token_veto=0.0)
    compute_advantages_and_returns(SimpleNamespace(strategy=SimpleNamespace(args=args)), [experience])
    per_turn = [[experience.advantages[i, a].item() for a, _ in spans[i]] for i in range(2)]
    # Returns [1.0, 0.5] against [0.0, 0.0]: each turn's baseline is the other episode's return at that turn.
    assert per_turn == [[1.0, 0.5], [-1.0, -0.5]]
    assert experience.action_mask.sum().item() == sum(b - a for row in spans for a, b in row)
