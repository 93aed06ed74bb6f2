"""The TRL and verl adapters driven by the frameworks' own classes (pinned in the `frameworks` extra) against
the live service (real HTTP, real CPU workers):

- TRL 1.16.0: a real `GRPOTrainer` (tiny local GPT-2, character tokenizer) computes rewards with its own
  `_calculate_rewards`, and runs one whole training step whose completions the service scores.
- verl 0.7.1: `compute_score` loaded by verl's own loader and called by its reward loop
  (`RewardLoopWorker` -> `NaiveRewardManager`); `compute_score_batch` called by verl's `BatchRewardManager`;
  `KernelGymInteraction` built from an interaction config by verl's registry and driven by verl's
  `ToolAgentLoop` state machine, with a scripted LLM server in place of vLLM/SGLang (which need a GPU).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import TINY_KERNEL, bundled_source, char_tokenizer, relu_candidate, unique

import rl_client.adapters.verl as verl_adapter
from rl_client.adapters.common import LabelError
from rl_client.adapters.trl import KernelGymReward

RELU = "level1/1_ReLU"
GELU = "level1/2_GELU_tanh"  # a ReLU kernel answers it wrongly


def good_answer() -> str:
    return f"Here is the kernel.\n```python\n{unique(bundled_source(RELU))}```"


def wrong_answer() -> str:
    return f"```python\n{unique(relu_candidate('return triton_relu(x) * 2.0'))}```"


@pytest.fixture
def service_env(stack, monkeypatch):
    """verl calls bare functions: the service is named through the environment."""
    monkeypatch.setenv("KERNELGYM_URL", stack.base_url)
    monkeypatch.setenv("KERNELGYM_RL_TIMEOUT_S", "240")
    return stack


@pytest.fixture
def event_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The thread's event loop, as in verl's Ray actors: verl's reward managers and agent loops take the current
    loop when they are built and run their executor calls on it."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield loop
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@pytest.fixture
def tokenizer_dir(tmp_path) -> Path:
    """A tokenizer on disk, as verl's workers load it (`actor_rollout_ref.model.path`)."""
    char_tokenizer().save_pretrained(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


# -- TRL ---------------------------------------------------------------------------------------------------
KERNEL = TINY_KERNEL.format(floor="0.0")  # the same (right) kernel answers every prompt


def tiny_lm(tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tokenizer), n_positions=1024, n_embd=64, n_layer=1, n_head=4,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        )
    )  # fmt: skip


def teach_kernel(model, tokenizer, prompts: list[list[dict]], steps: int = 120) -> None:
    """Supervised: after each chat prompt, answer with KERNEL and stop."""
    answer = [*tokenizer.encode(KERNEL), tokenizer.eos_token_id]
    ids, labels = [], []
    for messages in prompts:
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        ids.append(prompt + answer)
        labels.append([-100] * len(prompt) + answer)
    width = max(map(len, ids))
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(x)) + x for x in ids])
    labels = torch.tensor([[-100] * (width - len(x)) + x for x in labels])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        loss = model(ids, attention_mask=(ids != tokenizer.pad_token_id).long(), labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05, f"the tiny model did not learn the kernel (loss {loss.item():.3f})"


def grpo_trainer(tmp_path, rewards: list, dataset, tokenizer, model=None, **config):
    from trl import GRPOConfig, GRPOTrainer

    tokenizer.padding_side = "left"
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        logging_steps=1, max_steps=1, num_generations=2, seed=0, **{"per_device_train_batch_size": 2, **config},
    )  # fmt: skip
    return GRPOTrainer(
        model=model or tiny_lm(tokenizer),
        reward_funcs=rewards,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def test_trl_grpo_trainer_computes_rewards_through_the_adapter(stack, tmp_path):
    """GRPOTrainer._calculate_rewards (TRL 1.16.0) with conversational completions: it passes the label column,
    completion_ids, trainer_state, log_extra and log_metric; a row the service could not score comes back NaN."""
    pytest.importorskip("trl", reason="the frameworks extra (make test installs it)")
    from datasets import Dataset

    reward = KernelGymReward(url=stack.base_url, label_column="problem_id", timeout_s=240)
    impatient = KernelGymReward(url=stack.base_url, label_column="problem_id", timeout_s=0.01)
    rows = [{"prompt": [{"role": "user", "content": "Write ReLU in Triton."}], "problem_id": RELU}] * 2
    tokenizer = char_tokenizer()

    def rewards_from_trainer(reward_func: KernelGymReward, answers: list[str]):
        trainer = grpo_trainer(tmp_path, [reward_func], Dataset.from_list(rows), tokenizer)
        completions = [[{"role": "assistant", "content": a}] for a in answers]
        inputs = [{**rows[0], "completion": c} for c in completions]
        ids = [tokenizer.encode(a[:50]) for a in answers]
        per_func = trainer._calculate_rewards(inputs, [r["prompt"] for r in inputs], completions, ids)
        return per_func[:, 0].tolist(), trainer

    try:
        rewards, trainer = rewards_from_trainer(reward, [good_answer(), wrong_answer(), "I cannot write this."])
        # evaluations cannot finish in 10 ms: cancelled, unscored, NaN (TRL leaves the function out of the row)
        impatient_rewards, _ = rewards_from_trainer(impatient, [good_answer(), "I cannot write this."])
    finally:
        reward.close()
        impatient.close()
    assert rewards == [0.5, 0.0, 0.0]  # CPU: correct, but no speedup or coverage is measured
    assert [o["verdict"] for o in reward.last_outcomes] == ["passed", "incorrect", None]
    assert math.isnan(impatient_rewards[0]) and impatient_rewards[1] == 0.0  # no code is the model's fault: 0
    assert "did not finish" in impatient.last_outcomes[0]["feedback"]
    assert trainer._pending_extra_logs["kernelgym_drkernel-pr/verdict"] == ["passed", "incorrect", "unscored"]
    metrics = trainer._pending_metrics
    assert metrics["kernelgym_drkernel-pr/correct"] == [pytest.approx(1 / 3)]
    assert metrics["kernelgym_drkernel-pr/unscored"] == [0.0]


def test_trl_grpo_training_step_scores_generated_kernels_on_the_service(stack, tmp_path):
    """One `GRPOTrainer.train()` step: a tiny model taught to write a ReLU kernel answers a ReLU row and a GELU
    row (two generations each); the label column routes each completion to its problem on the service."""
    pytest.importorskip("trl", reason="the frameworks extra (make test installs it)")
    from datasets import Dataset

    rows = [
        {"prompt": [{"role": "user", "content": "Write ReLU."}], "problem_id": RELU},
        {"prompt": [{"role": "user", "content": "Write GELU."}], "problem_id": GELU},
    ]
    tokenizer = char_tokenizer()
    model = tiny_lm(tokenizer)
    teach_kernel(model, tokenizer, [r["prompt"] for r in rows])
    reward = KernelGymReward(url=stack.base_url, label_column="problem_id", timeout_s=240)
    try:
        trainer = grpo_trainer(
            tmp_path, [reward], Dataset.from_list(rows), tokenizer, model=model,
            per_device_train_batch_size=4, max_completion_length=len(KERNEL) + 8, temperature=0.1,
        )  # fmt: skip
        trainer.train()
    finally:
        reward.close()
    [step, _summary] = trainer.state.log_history
    assert sorted(o["verdict"] for o in reward.last_outcomes) == ["incorrect", "incorrect", "passed", "passed"]
    assert step["rewards/kernelgym_drkernel-pr/mean"] == pytest.approx(0.25)  # 0.5 for ReLU rows, 0 for GELU
    assert step["kernelgym_drkernel-pr/correct"] == pytest.approx(0.5)
    assert step["kernelgym_drkernel-pr/unscored"] == 0.0


# -- verl --------------------------------------------------------------------------------------------------
def verl_batch(tokenizer, answers: list[str], labels: list[str]):
    """A verl `DataProto` as its rollout hands it to the reward: left-padded prompts, right-padded responses,
    the label in `reward_model.ground_truth`."""
    from verl import DataProto

    prompts = [tokenizer.encode(f"Write a kernel for {label}.") for label in labels]
    responses = [tokenizer.encode(a) for a in answers]
    pw, rw = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (pw - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (rw - len(r)) for r in responses])
    mask = torch.tensor(
        [
            [0] * (pw - len(p)) + [1] * (len(p) + len(r)) + [0] * (rw - len(r))
            for p, r in zip(prompts, responses, strict=True)
        ]
    )
    return DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": response_ids, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["kernelbench"] * len(labels), dtype=object),
            "reward_model": np.array([{"ground_truth": label} for label in labels], dtype=object),
            "extra_info": np.array([{"index": i} for i in range(len(labels))], dtype=object),
        },
    )


def verl_config(tokenizer_dir: Path, path: str, name: str, manager: str = "naive"):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": str(tokenizer_dir)}},
            "reward": {
                "custom_reward_function": {"path": path, "name": name, "reward_kwargs": {}},
                "reward_manager": {"source": "register", "name": manager},
                "reward_model": {"enable": False},
            },
        }
    )


def test_verl_reward_loop_loads_compute_score_and_scores_each_sample(service_env, tokenizer_dir, event_loop):
    """verl 0.7.1's trainer path without Ray: RewardLoopWorker loads `compute_score` with verl's own loader
    (`pkg://` module path), builds the naive reward manager, and scores each sample of a DataProto."""
    pytest.importorskip("verl", reason="the frameworks extra (make test installs it)")
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker(verl_config(tokenizer_dir, "pkg://rl_client.adapters.verl", "compute_score"))
    data = verl_batch(worker.input_tokenizer, [good_answer(), wrong_answer(), "no code"], [RELU, RELU, RELU])
    outputs = event_loop.run_until_complete(worker.compute_score_batch(data))
    assert [o["reward_score"] for o in outputs] == [0.5, 0.0, 0.0]
    assert [o["reward_extra_info"]["correct"] for o in outputs] == [1.0, 0.0, 0.0]
    assert set(outputs[0]["reward_extra_info"]) >= {"score", "speedup", "coverage", "rejected"}
    assert all(isinstance(v, float) for o in outputs for v in o["reward_extra_info"].values())  # verl's metrics


def test_verl_batch_reward_manager_calls_compute_score_batch_from_its_file_path(service_env, tokenizer_dir):
    """`compute_score_batch` loaded from the adapter's file path by `get_custom_reward_fn` and called by
    verl's BatchRewardManager: the reward lands on each response's last token."""
    pytest.importorskip("verl", reason="the frameworks extra (make test installs it)")
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager import BatchRewardManager

    fn = get_custom_reward_fn(verl_config(tokenizer_dir, verl_adapter.__file__, "compute_score_batch"))
    tokenizer = char_tokenizer()
    manager = BatchRewardManager(tokenizer, num_examine=0, compute_score=fn)
    data = verl_batch(tokenizer, [wrong_answer(), good_answer()], [RELU, json.dumps({"problem_id": RELU})])
    out = manager(data, return_dict=True)
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[1] :].sum(-1)
    rewards = out["reward_tensor"]
    assert [rewards[i, lengths[i] - 1].item() for i in range(2)] == [0.0, 0.5]
    assert rewards.sum().item() == 0.5  # nothing anywhere else
    assert out["reward_extra_info"]["correct"] == [0.0, 1.0]


class ScriptedServer:
    """Stands in for verl's LLM server manager (vLLM/SGLang need a GPU): answers each turn with the next
    scripted text, and keeps the prompts it was sent."""

    def __init__(self, tokenizer, answers: list[str]):
        self.tokenizer, self.answers, self.prompts = tokenizer, list(answers), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(self.tokenizer.decode(prompt_ids))
        return TokenOutput(token_ids=[*self.tokenizer.encode(self.answers.pop(0)), self.tokenizer.eos_token_id])


def test_verl_tool_agent_loop_drives_the_interaction_turn_by_turn(service_env, tmp_path, event_loop):
    """verl's ToolAgentLoop (0.7.1) with an interaction config naming KernelGymInteraction: verl's registry
    builds it; the loop starts it with the row's interaction_kwargs, asks it for a user turn after each
    assistant turn, appends the service's feedback to the conversation and stops when it says done."""
    pytest.importorskip("verl", reason="the frameworks extra (make test installs it)")
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.interactions.base import BaseInteraction

    interactions = tmp_path / "interaction.yaml"
    interactions.write_text(
        "interaction:\n  - name: kernelgym\n    class_name: rl_client.adapters.verl.KernelGymInteraction\n"
        "    config: {max_turns: 2}\n"
    )
    multi_turn = {
        "max_user_turns": 5, "max_assistant_turns": 5, "max_parallel_calls": 1, "max_tool_response_length": 256,
        "tool_response_truncate_side": "middle", "tool_config_path": None, "format": "hermes",
        "interaction_config_path": str(interactions),
    }  # fmt: skip
    rollout = {"multi_turn": multi_turn, "prompt_length": 4096, "response_length": 16384}
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": rollout, "model": {}}})
    tokenizer = char_tokenizer()
    server = ScriptedServer(tokenizer, [wrong_answer(), good_answer()])
    loop = ToolAgentLoop(
        trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer, processor=None,
        dataset_cls=None, data_config=DictConfigWrap(OmegaConf.create({})),
    )  # fmt: skip
    interaction = loop.interaction_map["kernelgym"]
    assert isinstance(interaction, verl_adapter.KernelGymInteraction) and isinstance(interaction, BaseInteraction)

    output = event_loop.run_until_complete(
        loop.run(
            sampling_params={},
            raw_prompt=[{"role": "user", "content": "Write ReLU in Triton."}],
            extra_info={"interaction_kwargs": {"name": "kernelgym", "ground_truth": RELU}},
        )
    )
    assert output.extra_fields["turn_scores"] == [0.0, 0.5]  # wrong, then correct; done after max_turns=2
    assert len(server.prompts) == 2 and not server.answers
    second_prompt = server.prompts[1]
    assert "incorrect" in second_prompt.lower() or "mismatch" in second_prompt.lower()  # the service's feedback
    assert interaction._instances == {}  # the ended episode's state is gone (verl never finalizes)
    [episode] = interaction._last_rewards
    assert event_loop.run_until_complete(interaction.calculate_score(episode)) == 0.5
    event_loop.run_until_complete(interaction.finalize_interaction(episode))
    assert not interaction._last_rewards
    assert output.num_turns == 5  # the prompt, 2 assistant turns, 2 user turns (feedback, then the last one)
    # the trajectory's final reward (the reward loop's compute_score on the whole response) is the last answer's
    response = tokenizer.decode(output.response_ids, skip_special_tokens=True)
    assert verl_adapter.compute_score("kernelbench", response, RELU, extra_info={})["score"] == 0.5

    bad_row = {"interaction_kwargs": {"name": "kernelgym", "ground_truth": None}}
    with pytest.raises(LabelError):  # a row without a usable label fails before anything is generated
        event_loop.run_until_complete(loop.run(sampling_params={}, raw_prompt=[], extra_info=bad_row))
    assert len(server.prompts) == 2
