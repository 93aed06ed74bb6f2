"""TRLOO, PRS and MRS through verl's and TRL's own extension points (the installed verl 0.7.1 and TRL 1.16.0, on
CPU, hand-computed tensors), and episodes that end early (groups that shrink from turn to turn) in the local
trainer."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from helpers import char_tokenizer
from transformers import GPT2Config, GPT2LMHeadModel

from gym_client import KernelGymClient
from rl_client.algorithms import DRKERNEL_PR, turn_reward
from rl_client.config import TrainConfig
from rl_client.data import Problem
from rl_client.local.policy import LocalPolicy
from rl_client.local.trainer import LocalTrainer, make_optimizer
from rl_client.rollout import stop_when_fast
from rl_client.scoring import ServiceScorer, TurnOutcome


def tiny_lm(vocab: int, positions: int = 1024) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(
        GPT2Config(
            vocab_size=vocab, n_positions=positions, n_embd=32, n_layer=1, n_head=2, bos_token_id=None, eos_token_id=2
        )
    )


# -- verl ---------------------------------------------------------------------------------------------------
def test_verl_registry_gives_turn_level_trloo_with_shrinking_groups_and_faults_left_out():
    pytest.importorskip("verl.trainer.ppo.core_algos", reason="the frameworks extra (make test installs it)")
    from verl.trainer.config.algorithm import AlgoConfig
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    from rl_client.adapters.verl import TRLOO_ESTIMATOR, register_estimators

    register_estimators()
    register_estimators()  # a second call (every Ray worker runs the hook) is harmless
    fn = get_adv_estimator_fn(TRLOO_ESTIMATOR)
    # One prompt, four trajectories; answers are the mask's runs, the interaction's feedback is masked out.
    mask = torch.tensor(
        [
            [1, 1, 0, 0, 1, 1, 0, 0],  # two turns, final reward 1 on the last token
            [1, 1, 0, 0, 1, 1, 0, 0],  # two turns, final reward 0
            [1, 1, 0, 0, 0, 0, 0, 0],  # stopped after one turn (reward 0.5 after its answer)
            [1, 1, 0, 0, 1, 1, 0, 0],  # the service failed to judge it: NaN (compute_score_or_nan)
        ],
        dtype=torch.float32,
    )
    rewards = torch.zeros_like(mask)
    rewards[0, 7], rewards[2, 3], rewards[3, 7] = 1.0, 0.5, math.nan
    # the keyword arguments verl 0.7.1's compute_advantage passes to a registered estimator
    adv, returns = fn(token_level_rewards=rewards, response_mask=mask, config=AlgoConfig(), index=np.array(["p"] * 4))
    # Turn 1 (returns 1, 0, 0.5): each against the mean of the two others. Turn 2: only rows 0 and 1 are there.
    assert adv[0].tolist() == [0.75, 0.75, 0, 0, 1, 1, 0, 0]
    assert adv[1].tolist() == [-0.75, -0.75, 0, 0, -1, -1, 0, 0]
    assert adv[2].tolist() == [0.0] * 8
    assert adv[3].tolist() == [0.0] * 8  # out of the loss, and of every baseline above
    assert returns[0].tolist() == [1, 1, 0, 0, 1, 1, 0, 0] and returns[2].tolist()[:2] == [0.5, 0.5]


# -- TRL ----------------------------------------------------------------------------------------------------
def trl_trainer(tmp_path, reward_funcs: list, **algorithms):
    from datasets import Dataset
    from trl import GRPOConfig

    from rl_client.adapters.trl_trainer import KernelGymGRPOTrainer, TRLAlgorithms

    tokenizer = char_tokenizer()
    tokenizer.padding_side = "left"
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        logging_steps=1, max_steps=1, num_generations=2, per_device_train_batch_size=2, max_completion_length=8,
        seed=0,
    )  # fmt: skip
    return KernelGymGRPOTrainer(
        model=tiny_lm(len(tokenizer)),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "Write ReLU.", "label": "level1/1_ReLU"}] * 2),
        processing_class=tokenizer,
        kernelgym=TRLAlgorithms(**algorithms),
    )


def batch(n: int, length: int) -> dict:
    return {"advantages": torch.zeros(n), "completion_mask": torch.ones(n, length, dtype=torch.long)}


def test_trl_trloo_leaves_an_unscored_completion_out_and_mrs_rejects_without_reweighting(tmp_path):
    pytest.importorskip("trl", reason="the frameworks extra (make test installs it)")
    trainer = trl_trainer(tmp_path, [lambda **kw: [0.0] * len(kw["completions"])], prs=False, mrs=True)
    # two prompts × three completions; NaN: every reward function returned None (a service fault)
    rewards = torch.tensor([[1.0], [0.0], [math.nan], [0.5], [0.5], [0.0]])
    out = batch(6, 3)
    old = torch.zeros(6, 3)
    sampled = old.clone()
    sampled[3] = -0.01  # geometric ratio e^0.01 = 1.01: outside [0.999, 1.001]
    old[4, 1], sampled[4] = -10.0, torch.tensor([-5.0, 0.0, -5.0])  # ratios e^5, e^-10, e^5: in the band (mean
    # 0) but e^-10 < 1e-4: the token veto masks the completion
    out.update(old_per_token_logps=old, sampling_per_token_logps=sampled, importance_sampling_ratio=torch.rand(6, 3))
    out = trainer.apply_algorithms(out, rewards, group=3)
    # TRLOO: prompt 1 holds 1 and 0 (the NaN is no baseline): ±1; prompt 2: 0.5 − mean(0.5, 0) = 0.25, 0 − 0.5
    assert out["advantages"].tolist() == [1.0, -1.0, 0.0, 0.25, 0.25, -0.5]
    assert out["completion_mask"].sum(dim=1).tolist() == [3, 3, 0, 0, 0, 3]
    assert torch.equal(out["importance_sampling_ratio"], torch.ones(6, 3))
    assert list(trainer._logs["advantages"]) == [0.25, -0.5]  # TRL keeps the last generation batch (2 here)
    assert trainer._metrics["train"]["kernelgym/mrs_kept"] == [0.8]  # of the five with tokens, only row 3 is out
    trainer.kernelgym = trainer.kernelgym.model_copy(update={"estimator": "grpo"})  # GRPO: the sample in its mean
    grpo = trainer.apply_algorithms(
        batch(6, 3) | {"old_per_token_logps": old, "sampling_per_token_logps": old}, rewards, 3
    )
    assert grpo["advantages"].tolist() == pytest.approx([0.5, -0.5, 0.0, 1 / 6, 1 / 6, -1 / 3])
    trainer.kernelgym = trainer.kernelgym.model_copy(update={"mrs": True})
    with pytest.raises(RuntimeError, match="use_vllm=True"):
        trainer.apply_algorithms(batch(6, 3), rewards, 3)  # no sampler log-probs without vLLM


def test_trl_prs_drops_a_lazy_correct_completion_from_the_loss_only(tmp_path):
    pytest.importorskip("trl", reason="the frameworks extra (make test installs it)")
    from rl_client.adapters.trl import KernelGymReward

    reward = KernelGymReward(url="http://127.0.0.1:9", label_column="label")
    trainer = trl_trainer(tmp_path, [reward], prs=True)
    # the reward function's outcomes for this process's completions: correct with coverage 0.2 (under the 0.3
    # threshold: rejected for sure), correct with unknown coverage (CPU: kept), incorrect (always kept)
    reward.last_outcomes = [
        {"verdict": "passed", "coverage": 0.2, "speedup": 1.0, "feedback": ""},
        {"verdict": "passed", "coverage": None, "speedup": None, "feedback": ""},
        {"verdict": "incorrect", "coverage": None, "speedup": None, "feedback": ""},
    ]
    out = trainer.apply_algorithms(batch(3, 2), torch.tensor([[1.0], [0.5], [0.0]]), group=3)
    assert out["completion_mask"].sum(dim=1).tolist() == [0, 2, 2]
    assert out["advantages"].tolist() == [0.75, 0.0, -0.75]  # the rejected one still counts in the baselines
    reward.close()


def test_trl_training_step_runs_through_the_subclass(tmp_path):
    """One real `train()` step: TRL generates, a reward function returns None for one completion; the logged
    advantages are TRLOO's (1 for the scored one, alone in its group: no baseline), where TRL's own are 0, 0."""
    pytest.importorskip("trl", reason="the frameworks extra (make test installs it)")
    trainer = trl_trainer(tmp_path, [lambda **kw: [1.0, None]], prs=False)
    trainer.train()
    assert list(trainer._logs["advantages"]) == [1.0, 0.0]
    assert trainer.state.global_step == 1


# -- the local trainer with episodes that stop --------------------------------------------------------------
def outcome(correct: bool, speedup: float | None) -> TurnOutcome:
    verdict = "passed" if correct else "incorrect"
    return TurnOutcome(turn_reward(DRKERNEL_PR, verdict, speedup), verdict, correct, speedup, None, "")


def test_stop_when_fast_needs_a_pass_and_a_measured_speedup_above_p():
    stop = stop_when_fast(1.2)
    assert stop(outcome(True, 1.3)) and not stop(outcome(True, 1.2)) and not stop(outcome(False, 5.0))
    assert not stop(outcome(True, None))  # a CPU service measures no speedup: the episode goes on


def test_local_trainer_keeps_each_sample_with_its_episode_when_episodes_stop_early():
    tokenizer = char_tokenizer()
    policy = LocalPolicy(tiny_lm(len(tokenizer), 4096), tokenizer, "cpu", 1.0, 1.0, max_new_tokens=6)
    cfg = TrainConfig(model="tiny", samples_per_prompt=4, max_turns=3, prs=False, mrs=True, token_veto=0.0)
    with KernelGymClient("http://127.0.0.1:9") as client:  # answers without code never reach the service
        scorer = ServiceScorer(client, DRKERNEL_PR)
        trainer = LocalTrainer(cfg, policy, scorer, make_optimizer(cfg, policy.model.parameters()))
        decisions = itertools.cycle([True, False])  # after each turn, every other live episode stops
        trainer.stop = lambda _: next(decisions)
        metrics = trainer.step([Problem(id="p", reference="class Model: ...", inline_reference="class Model: ...")])
        scorer.close()
    batch = trainer.last_batch
    assert [len(ep.turns) for ep in batch.episodes] == [1, 2, 1, 3]
    assert batch.taken.tolist() == [[True, False, False], [True, True, False], [True, False, False], [True] * 3]
    for t, row in enumerate(batch.samples):  # the sample of turn t is the answer that episode gave at turn t
        for ep, sample in zip(batch.episodes, row, strict=True):
            assert (sample is None) == (t >= len(ep.turns))
            if sample is not None:
                assert tokenizer.decode(sample.response_ids, skip_special_tokens=True) in ep.turns[t].answer
    assert metrics["turns/mean"] == 7 / 4 and metrics["mrs/kept"] == 1.0
