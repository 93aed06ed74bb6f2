"""A turn the service failed to judge is never trained on as a reward of 0: the OpenRLHF reward server answers 503
(OpenRLHF's client tries again), the OpenRLHF agent scores it again and then marks it, and TRLOO leaves the marked
trajectory out of the loss and the baselines. The faults are real: a device class no worker serves, a deadline
that passes while the evaluation waits in the live service's queue. verl's reward function raises (or, for the
`kernelgym_trloo` estimator, returns NaN) and its interaction ends the episode with no turn score."""

from __future__ import annotations

import asyncio
import math
import time
from types import SimpleNamespace

import httpx
import pytest
from helpers import bundled_source, char_tokenizer, serving

pytest.importorskip("openrlhf.utils.agent")

from rl_client import openrlhf_agent
from rl_client.adapters.openrlhf_reward import create_app
from rl_client.settings import SETTINGS_ENV, RLSettings, TrainerSettings

RELU = "level1/1_ReLU"
ANSWER = f"```python\n{bundled_source(RELU)}```"


def test_the_reward_server_answers_503_not_a_zero(stack):
    with serving(create_app(RLSettings(url=stack.base_url, device_class="tpu"), answer_within_s=60)) as url:
        r = httpx.post(f"{url}/get_reward", json={"query": [ANSWER], "prompts": [""], "labels": [RELU]}, timeout=90)
    assert r.status_code == 503, r.text
    assert "failed to judge 1 answer" in r.json()["detail"] and "rewards" not in r.json()


@pytest.fixture
def unserved(stack, monkeypatch):
    """The agent's service holds evaluations queued (`h100`: accepted, no worker) past a 1 s deadline."""
    monkeypatch.setenv("KERNELGYM_URL", stack.base_url)
    monkeypatch.setenv("KERNELGYM_RL_DEVICE_CLASS", "h100")
    monkeypatch.setenv("KERNELGYM_RL_TIMEOUT_S", "1")
    monkeypatch.setenv("KERNELGYM_RL_MAX_TURNS", "1")
    monkeypatch.setenv("KERNELGYM_RL_FAULT_RETRIES", "1")
    monkeypatch.setenv("KERNELGYM_RL_FAULT_BACKOFF_S", "0.2")
    monkeypatch.setattr(openrlhf_agent, "_scorer", None)
    yield monkeypatch
    if openrlhf_agent._scorer is not None:
        openrlhf_agent._scorer.close()


def step(action: str) -> dict:
    agent = openrlhf_agent.KernelAgent()
    asyncio.run(agent.reset({"label": RELU, "observation": "write a kernel"}))
    return asyncio.run(agent.step({"action_text": action}))


def test_the_agent_tries_again_then_marks_the_turn_for_trloo(unserved):
    unserved.setenv(SETTINGS_ENV, TrainerSettings(estimator="trloo").to_json())
    started = time.monotonic()
    out = step(ANSWER)
    assert time.monotonic() - started >= 2 * 1 + 0.2  # two deadlines and the wait between them
    assert out["extra_logs"]["turn_fault_1"] == 1.0 and out["extra_logs"]["turn_reward_1"] == 0.0


def test_the_agent_raises_where_the_estimator_cannot_leave_the_turn_out(unserved):
    unserved.setenv(SETTINGS_ENV, TrainerSettings().to_json())  # OpenRLHF's own estimator
    with pytest.raises(openrlhf_agent.ServiceFault, match="failed to judge turn 1"):
        step(ANSWER)


def test_an_answer_without_code_is_the_policys_failure_not_a_fault(unserved):
    out = step("no code here")
    assert out["extra_logs"]["turn_fault_1"] == 0.0 and out["extra_logs"]["turn_reward_1"] == 0.0


def test_trloo_leaves_a_faulted_trajectory_out_of_the_loss_and_the_baselines(monkeypatch):
    from openrlhf_source import parse_train_ppo_ray, response_to_experience, split_rollout_samples

    from rl_client.openrlhf_train import rewrite_arguments
    from rl_client.openrlhf_trloo import compute_advantages_and_returns
    from rl_client.turn_tokens import turn_spans

    monkeypatch.setenv("KERNELGYM_RL_MAX_TURNS", "1")
    tokenizer = char_tokenizer()

    def response(reward: float, fault: bool) -> dict:
        logs = {"num_turns": 1.0, **openrlhf_agent.KernelAgent.turn_logs(1, reward, reward > 0, None, None, fault)}
        prompt, answer = tokenizer.encode("p"), tokenizer.encode("answer")
        return {
            "prompt": "p", "label": RELU, "images": None, "mm_train_inputs": None, "reward": reward,
            "scores": reward, "observation_tokens": prompt + answer,
            "action_ranges": [(len(prompt), len(prompt) + len(answer))], "rollout_log_probs": None,
            "truncated": False, "extra_logs": logs,
        }  # fmt: skip

    command = [
        "--actor.model_name_or_path", "model", "--train.agent_func_path", "rl_client/openrlhf_agent.py",
        "--algo.advantage.estimator", "trloo", "--algo.kl.init_coef", "0", "--kernelgym.token_veto", "0",
        "--kernelgym.no_prs", "--rollout.batch_size", "1", "--rollout.n_samples_per_prompt", "3",
        "--rollout.micro_batch_size", "3", "--vllm.num_engines", "1", "--actor.num_gpus_per_node", "1",
    ]  # fmt: skip
    launch = rewrite_arguments(command)
    args = parse_train_ppo_ray(launch.openrlhf_argv)
    # Three samples of one prompt: 1.0, 0.0, and one the service never judged (scored 0 for the log only).
    samples = [
        response_to_experience(response(r, f), max_len=1000) for r, f in ((1.0, False), (0.0, False), (0.0, True))
    ]
    [experience] = split_rollout_samples(samples, args)
    monkeypatch.setenv(SETTINGS_ENV, launch.settings.to_json())
    compute_advantages_and_returns(SimpleNamespace(strategy=SimpleNamespace(args=args)), [experience])
    spans = turn_spans(experience.action_mask)
    assert [len(s) for s in spans] == [1, 1, 0]  # the faulted answer's tokens left the loss
    # The faulted sample is no baseline: each judged one is measured against the other judged one alone.
    assert [experience.advantages[i, spans[i][0][0]].item() for i in (0, 1)] == [1.0, -1.0]
    assert experience.info["trloo/service_fault_turns"].tolist() == [0.0, 0.0, 1.0]


@pytest.fixture
def verl_unserved(stack, monkeypatch):
    """verl's reward function and interaction, on a service that holds their evaluations past a 1 s deadline."""
    pytest.importorskip("verl.interactions.base", reason="the frameworks extra (make test installs it)")
    monkeypatch.setenv("KERNELGYM_URL", stack.base_url)
    monkeypatch.setenv("KERNELGYM_RL_DEVICE_CLASS", "h100")
    monkeypatch.setenv("KERNELGYM_RL_TIMEOUT_S", "1")
    monkeypatch.setenv("KERNELGYM_RL_FAULT_RETRIES", "0")
    return monkeypatch


def test_verl_raises_or_marks_a_fault_never_scores_it_zero(verl_unserved):
    from rl_client.adapters import verl
    from rl_client.adapters.common import ServiceFaultError

    with pytest.raises(ServiceFaultError, match="compute_score_or_nan"):
        verl.compute_score("kernelgym", ANSWER, RELU)
    marked = verl.compute_score_or_nan("kernelgym", ANSWER, RELU)
    assert math.isnan(marked["score"]) and marked["service_fault"] == 1.0
    interaction = verl.KernelGymInteraction({"max_turns": 3})
    episode = asyncio.run(interaction.start_interaction(ground_truth=RELU))
    done, text, reward, metrics = asyncio.run(
        interaction.generate_response(episode, [{"role": "assistant", "content": ANSWER}])
    )
    # the episode ends with no turn score (verl's agent loop leaves None out of turn_scores)
    assert done and reward is None and metrics["service_fault"] == 1.0 and "did not finish" in text
    with pytest.raises(ServiceFaultError):
        asyncio.run(interaction.calculate_score(episode))
