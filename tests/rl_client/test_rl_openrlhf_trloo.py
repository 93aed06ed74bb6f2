"""TRLOO, PRS and the token veto inside OpenRLHF's experience maker (`rl_client/openrlhf_trloo.py`), on batches
made by OpenRLHF 0.11.2's own code: trajectories in the agent executor's output format become `Experience`s through
`SamplesGenerator._process_response_into_experience` and are numbered and micro-batched by
`RemoteExperienceMaker.split_rollout_samples`, both compiled from the installed files (their modules import vLLM),
with the arguments parsed by OpenRLHF's own `train_ppo_ray` parser. Only the actor's forward pass (which fills
`action_log_probs`) is replaced: by the rollout log-probs, or by them with one token moved."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("openrlhf.utils.agent")

from openrlhf_source import parse_train_ppo_ray, response_to_experience, split_rollout_samples

from rl_client import openrlhf_trloo
from rl_client.openrlhf_agent import KernelAgent
from rl_client.openrlhf_train import SETTINGS_ENV, TrainerSettings, rewrite_arguments
from rl_client.turn_tokens import turn_spans

ROLLOUT_LOGPROB = -0.5
COMMAND = [
    "--actor.model_name_or_path", "model",
    "--train.agent_func_path", "rl_client/openrlhf_agent.py",
    "--algo.advantage.estimator", "trloo",
    "--algo.kl.init_coef", "0",
    "--algo.advantage.is_correction_level", "seq",
    "--rollout.batch_size", "2",
    "--rollout.n_samples_per_prompt", "2",
    "--rollout.micro_batch_size", "3",  # one group straddles two micro-batches
    "--vllm.num_engines", "1",
    "--actor.num_gpus_per_node", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def args():
    return parse_train_ppo_ray(rewrite_arguments(COMMAND).openrlhf_argv)


def trajectory(prompt_len: int, turns: list[tuple[int, float, bool, float | None]], monkeypatch) -> dict:
    """What OpenRLHF's MultiTurnAgentExecutor returns for one episode of our agent (2 turns at most): turns are
    (answer tokens, reward, correct, coverage); feedback of 3 tokens between answers."""
    monkeypatch.setenv("KERNELGYM_RL_MAX_TURNS", "2")
    logs = dict(KernelAgent().logs)
    tokens, ranges, logprobs = list(range(1, prompt_len + 1)), [], [0.0] * prompt_len
    for k, (n, reward, correct, coverage) in enumerate(turns, 1):
        ranges.append((len(tokens), len(tokens) + n))
        tokens += [100 + k] * n
        logprobs += [ROLLOUT_LOGPROB] * n
        logs.update(KernelAgent.turn_logs(k, reward, correct, coverage, None))
        logs["num_turns"] = float(k)
        if k < len(turns):
            tokens += [7, 7, 7]
            logprobs += [0.0] * 3
    return {
        "prompt": "p",
        "label": "level1/1_ReLU",
        "images": None,
        "mm_train_inputs": None,
        "reward": sum(t[1] for t in turns),
        "scores": turns[-1][1],
        "observation_tokens": tokens,
        "action_ranges": ranges,
        "rollout_log_probs": logprobs,
        "truncated": False,
        "extra_logs": logs,
    }


def batch(args, monkeypatch):
    """Two prompts × two samples, in prompt order as OpenRLHF's sample generator hands them over."""
    responses = [
        # prompt 0: returns [1.5, 1.0] and [0.5, 0.5]
        trajectory(5, [(3, 0.5, True, 0.5), (2, 1.0, True, 0.6)], monkeypatch),
        trajectory(4, [(2, 0.0, False, None), (4, 0.5, True, 0.8)], monkeypatch),
        # prompt 1: a correct turn of coverage 0.2 (PRS: always rejected), then a failure after success;
        # and a trajectory that stopped after one turn
        trajectory(6, [(2, 1.0, True, 0.2), (3, 0.0, False, None)], monkeypatch),
        trajectory(5, [(4, 0.0, False, None)], monkeypatch),
    ]
    samples = [response_to_experience(r, max_len=args.data.max_len) for r in responses]
    experiences = split_rollout_samples(samples, args)
    for e in experiences:  # the actor agrees with vLLM exactly
        e.action_log_probs = e.rollout_log_probs.clone()
    return experiences


def run(experiences, args, monkeypatch, settings: TrainerSettings | None = None):
    settings = settings or rewrite_arguments(COMMAND).settings
    monkeypatch.setenv(SETTINGS_ENV, settings.to_json())
    maker = SimpleNamespace(strategy=SimpleNamespace(args=args))
    return openrlhf_trloo.compute_advantages_and_returns(maker, experiences)


def rows(experiences, name):
    """Per trajectory (in batch order), the given per-token tensor cut to its own width."""
    out = []
    for e in sorted(experiences, key=lambda e: e.index[0]):
        out += list(getattr(e, name))
    return out


def per_turn(values, spans):
    """The value on each turn's span, which must be constant over it."""
    result = []
    for a, b in spans:
        assert len(set(values[a:b].tolist())) == 1, values[a:b]
        result.append(values[a].item())
    return result


def test_the_batch_is_split_as_openrlhf_does(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    assert [e.index for e in experiences] == [[0, 1, 2], [3]]
    assert experiences[0].info["num_turns"].tolist() == [2.0, 2.0, 2.0]


def test_each_turn_gets_its_leave_one_out_advantage_on_its_tokens(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    spans = [turn_spans(m[None])[0] for m in rows(experiences, "action_mask")]
    run(experiences, args, monkeypatch)
    adv = [per_turn(a, s) for a, s in zip(rows(experiences, "advantages"), spans, strict=True)]
    # Prompt 0, turn 1: 1.5 − 0.5 and 0.5 − 1.5; turn 2: 1.0 − 0.5 and 0.5 − 1.0.
    # Prompt 1, turn 1: 1.0 − 0.0 and 0.0 − 1.0 (the PRS-rejected turn stays in the baseline); its turn 2 is a
    # failure after success: out of the baselines, advantage 0.
    assert adv == [[1.0, 0.5], [-1.0, -0.5], [1.0, 0.0], [-1.0]]
    returns = [per_turn(r, s) for r, s in zip(rows(experiences, "returns"), spans, strict=True)]
    assert returns == [[1.5, 1.0], [0.5, 0.5], [1.0, 0.0], [0.0]]
    for a, s in zip(rows(experiences, "advantages"), spans, strict=True):  # prompt, feedback, padding: 0
        assert a.dtype == torch.float32
        outside = torch.ones_like(a, dtype=torch.bool)
        for lo, hi in s:
            outside[lo:hi] = False
        assert not a[outside].any()


def test_rejected_turns_leave_the_loss_and_are_counted(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    before = rows(experiences, "action_mask")
    spans = [turn_spans(m[None])[0] for m in before]
    run(experiences, args, monkeypatch)
    after = rows(experiences, "action_mask")
    in_loss = [[bool(m[a:b].all()) for a, b in s] for m, s in zip(after, spans, strict=True)]
    assert in_loss == [[True, True], [True, True], [False, False], [True]]
    assert all(int(a.sum()) == sum(int(a[lo:hi].sum()) for lo, hi in s) for a, s in zip(after, spans, strict=True))
    info = {k: torch.cat([e.info[k] for e in experiences]).tolist() for k in experiences[0].info if "trloo/" in k}
    assert info["trloo/turns_in_loss"] == [2, 2, 0, 1]
    assert info["trloo/prs_rejected_turns"] == [0, 0, 1, 0]
    assert info["trloo/failure_after_success_turns"] == [0, 0, 1, 0]
    assert info["trloo/vetoed_turns"] == [0, 0, 0, 0]
    assert torch.cat([e.info["return"] for e in experiences]).tolist() == [1.5, 0.5, 1.0, 0.0]
    assert all(e.kl is None for e in experiences)


def test_a_token_the_trainer_finds_improbable_vetoes_its_turn(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    second = experiences[0]
    [spans] = turn_spans(second.action_mask[1:2])
    a, _ = spans[1]
    second.action_log_probs[1, a] = ROLLOUT_LOGPROB + math.log(5e-5)  # π_train/π_rollout = 5e-5 < 1e-4
    run(experiences, args, monkeypatch)
    mask = second.action_mask[1]
    assert mask[spans[0][0] : spans[0][1]].all() and not mask[spans[1][0] : spans[1][1]].any()
    assert second.info["trloo/vetoed_turns"].tolist() == [0, 1, 0]
    # The vetoed turn keeps its advantage (and stays in its peer's baseline): only the loss loses it.
    assert second.advantages[1, a].item() == pytest.approx(-0.5)
    assert second.advantages[0, turn_spans(second.action_mask[0:1])[0][1][0]].item() == pytest.approx(0.5)


def test_the_veto_needs_rollout_log_probs(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    for e in experiences:
        e.rollout_log_probs = None
    with pytest.raises(ValueError, match="is_correction_level"):
        run(experiences, args, monkeypatch)
    run(batch(args, monkeypatch), args, monkeypatch, TrainerSettings(estimator="trloo", token_veto=0.0))


def test_prs_off_keeps_the_lazy_turn(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    run(experiences, args, monkeypatch, TrainerSettings(estimator="trloo", prs=False))
    assert torch.cat([e.info["trloo/turns_in_loss"] for e in experiences]).tolist() == [2, 2, 1, 1]


def test_a_batch_with_no_turn_left_in_the_loss_makes_no_update(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    masks = [e.action_mask.clone() for e in experiences]
    settings = TrainerSettings(estimator="trloo", prs_threshold=2.0)  # every correct turn rejected
    for e in experiences:  # and no incorrect turn: all four trajectories correct everywhere
        for k in (1, 2):
            e.info[f"turn_correct_{k}"] = torch.ones_like(e.info[f"turn_correct_{k}"])
            e.info[f"turn_coverage_{k}"] = torch.full_like(e.info[f"turn_coverage_{k}"], 0.5)
    run(experiences, args, monkeypatch, settings)
    for e, m in zip(experiences, masks, strict=True):
        assert torch.equal(e.action_mask, m) and not e.advantages.any()


def test_experiences_without_turn_rewards_are_refused(args, monkeypatch):
    experiences = batch(args, monkeypatch)
    for e in experiences:
        e.info = {k: v for k, v in e.info.items() if not k.startswith("turn_reward_")}
    with pytest.raises(ValueError, match="openrlhf_agent"):
        run(experiences, args, monkeypatch)


def test_check_args_uses_openrlhfs_parsed_arguments(args):
    openrlhf_trloo.check_args(args)
    with_kl = parse_train_ppo_ray([*rewrite_arguments(COMMAND).openrlhf_argv, "--algo.kl.init_coef", "0.01"])
    with pytest.raises(ValueError, match="KL"):
        openrlhf_trloo.check_args(with_kl)
    as_loss = parse_train_ppo_ray(
        [*rewrite_arguments(COMMAND).openrlhf_argv, "--algo.kl.init_coef", "0.01", "--algo.kl.use_loss"]
    )
    openrlhf_trloo.check_args(as_loss)
    penalised = parse_train_ppo_ray([*rewrite_arguments(COMMAND).openrlhf_argv, "--reward.overlong_buffer_len", "64"])
    with pytest.raises(ValueError, match="length penalties"):
        openrlhf_trloo.check_args(penalised)


class Maker:
    """A class with OpenRLHF's method name, to watch `install` keep and call the original."""

    def __init__(self) -> None:
        self.calls: list[list] = []

    def compute_advantages_and_returns(self, experiences):
        self.calls.append(experiences)
        return experiences


def test_install_keeps_openrlhfs_method_for_other_estimators(monkeypatch):
    original = Maker.__dict__["compute_advantages_and_returns"]
    monkeypatch.setattr(Maker, "compute_advantages_and_returns", original)
    openrlhf_trloo.install(Maker)
    openrlhf_trloo.install(Maker)  # a second install changes nothing
    assert Maker.__dict__["compute_advantages_and_returns"] is openrlhf_trloo.compute_advantages_and_returns
    assert getattr(Maker, openrlhf_trloo.ORIGINAL) is original
    maker = Maker()
    monkeypatch.setenv(SETTINGS_ENV, TrainerSettings().to_json())  # estimator None: OpenRLHF's own
    assert maker.compute_advantages_and_returns(["x"]) == ["x"] and maker.calls == [["x"]]
    monkeypatch.delenv(SETTINGS_ENV)
    assert maker.compute_advantages_and_returns(["y"]) == ["y"] and len(maker.calls) == 2
