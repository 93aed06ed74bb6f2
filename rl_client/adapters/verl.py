"""verl's custom reward function and multi-turn interaction (tested against verl 0.7.1's own loader, reward
loop and tool agent loop). In the trainer config:

    reward.custom_reward_function.path=pkg://rl_client.adapters.verl   # or this file's path
    reward.custom_reward_function.name=compute_score

with `KERNELGYM_URL` (and `KERNELGYM_API_KEY`) in the workers' environment. `ground_truth` is the row's label:
a problem id, a reference source, or JSON with `problem_id` or `reference`. The score is a dict whose `score`
is the reward and whose other numeric entries verl logs as metrics.

A service fault (an answer the service failed to judge) is scored again `KERNELGYM_RL_FAULT_RETRIES` times; if it
persists, `compute_score` raises `ServiceFaultError`: verl's reward function must return a number, which verl puts
on the sample's last token, so it has no way to leave a sample out. `compute_score_or_nan` returns NaN instead, for
use with this module's advantage estimator `kernelgym_trloo`, which takes a trajectory with a NaN reward out of the
loss and the baselines (verl's own estimators would spread the NaN). The interaction ends an episode whose turn was
not judged, with no turn score (verl's agent loop leaves a `None` score out of `turn_scores`).
"""

from __future__ import annotations

import asyncio
import math
import threading
import uuid
from collections import OrderedDict
from typing import Any

import torch

from rl_client.adapters.common import ServiceFaultError, job_from_label, outcome_metrics, score_judged
from rl_client.algorithms import judged_mask
from rl_client.prompts import next_turn
from rl_client.scoring import ScoreJob, ServiceScorer, TurnOutcome
from rl_client.settings import RLSettings
from rl_client.turn_tokens import token_advantages, turn_rewards

TRLOO_ESTIMATOR = "kernelgym_trloo"

_lock = threading.Lock()
_scorers: dict[RLSettings, ServiceScorer] = {}


def _scorer() -> ServiceScorer:
    """One scorer (HTTP client and thread pool) per process and configuration."""
    config = RLSettings.from_env()
    with _lock:
        if config not in _scorers:
            _scorers[config] = config.scorer()
        return _scorers[config]


def _judged(jobs: list[ScoreJob]) -> list[TurnOutcome]:
    config = RLSettings.from_env()
    return score_judged(_scorer(), jobs, config.fault_retries, config.fault_backoff_s)


def _score(outcome: TurnOutcome, fault_as_nan: bool) -> dict[str, Any]:
    if outcome.service_fault and not fault_as_nan:
        raise ServiceFaultError(
            f"the service failed to judge an answer ({outcome.feedback}); verl's reward function cannot leave a "
            f"sample out: use compute_score_or_nan with algorithm.adv_estimator={TRLOO_ESTIMATOR}"
        )
    metrics = outcome_metrics(outcome)
    if outcome.service_fault:
        metrics["score"] = math.nan
    return metrics


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, **_: Any
) -> dict[str, Any]:
    """The reward of one answer; raises `ServiceFaultError` where the service failed to judge it."""
    return _score(_judged([job_from_label(ground_truth, solution_str)])[0], fault_as_nan=False)


def compute_score_or_nan(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, **_: Any
) -> dict[str, Any]:
    """`compute_score`, with a NaN score where the service failed to judge the answer (for `kernelgym_trloo`)."""
    return _score(_judged([job_from_label(ground_truth, solution_str)])[0], fault_as_nan=True)


def compute_score_batch(
    data_sources: list[str],
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list[dict[str, Any] | None] | None = None,
    **_: Any,
) -> list[dict[str, Any]]:
    """For verl's batch reward manager: the whole batch is evaluated concurrently (faults as in `compute_score`)."""
    jobs = [job_from_label(gt, sol) for gt, sol in zip(ground_truths, solution_strs, strict=True)]
    return [_score(o, fault_as_nan=False) for o in _judged(jobs)]


def trloo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage estimator `kernelgym_trloo` (register with `register_estimators`): turn-level TRLOO on
    verl's batch. A trajectory's turns are the runs of its response mask (the interaction's feedback is masked
    out); a turn's reward is the sum of the token rewards from its first token to the next turn's (verl's reward
    loop puts the score on the last token, so it counts at the last turn); the group is `index` (verl's `uid`).
    Failed turns after a passed one leave the loss and the baselines; a trajectory with a NaN reward (a service
    fault, `compute_score_or_nan`) gets advantage 0 and leaves every baseline. Returns (advantages, returns)."""
    rewards, num_turns = turn_rewards(token_level_rewards, response_mask)
    fault = torch.isnan(rewards)
    gamma = float(getattr(config, "gamma", 1.0)) if config is not None else 1.0
    out = token_advantages(
        response_mask,
        torch.nan_to_num(rewards, nan=0.0),
        num_turns,
        list(index),
        gamma,
        judged=judged_mask(fault),
    )
    dtype = token_level_rewards.dtype
    return out.advantages.to(dtype) * response_mask, out.returns.to(dtype) * response_mask


def register_estimators() -> None:
    """Register `kernelgym_trloo` in verl's advantage-estimator registry (`algorithm.adv_estimator=kernelgym_trloo`).
    verl computes advantages in its TaskRunner actor, so call this there: pass
    `+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=rl_client.adapters.verl.register_estimators`."""
    from verl.trainer.ppo import core_algos

    if core_algos.ADV_ESTIMATOR_REGISTRY.get(TRLOO_ESTIMATOR) is not trloo_advantage:
        core_algos.register_adv_est(TRLOO_ESTIMATOR)(trloo_advantage)


try:  # verl installs whole only with its GPU stack; the interaction keeps its interface without it
    from verl.interactions.base import BaseInteraction as _InteractionBase
except ImportError:

    class _InteractionBase:  # type: ignore[no-redef]
        def __init__(self, config: dict[str, Any]):
            self.config = config
            self.name = config.get("name", "interaction_agent")


class KernelGymInteraction(_InteractionBase):
    """A multi-turn interaction for verl's agent loop (verl <= 0.7; verl 0.8 removed `verl.interactions`): each
    assistant turn is evaluated by the service, the turn's reward is returned, and the service's feedback
    becomes the next user message, for up to `max_turns` turns (config key, default 3). Register it in verl's
    interaction config with `class_name: rl_client.adapters.verl.KernelGymInteraction`; each row's
    `extra_info.interaction_kwargs` carries `name` and `ground_truth` (the row's label).

    verl's tool agent loop (0.7.1) calls only `start_interaction` and `generate_response`, never
    `finalize_interaction`, so an episode's state is dropped when it ends here (`max_turns`) and at most
    `max_instances` (config key, default 4096) episodes are kept: the oldest go first when the agent loop
    stops episodes itself (its own turn or length limits)."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        self.max_turns = int(config.get("max_turns", 3))
        self.feedback_chars = int(config.get("feedback_chars", 2000))
        self.max_instances = int(config.get("max_instances", 4096))
        self._instances: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._last_rewards: OrderedDict[str, float] = OrderedDict()  # of ended episodes, for calculate_score

    @staticmethod
    def _remember(table: OrderedDict, key: str, value: Any, limit: int) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > limit:
            table.popitem(last=False)

    async def start_interaction(self, instance_id: str | None = None, ground_truth: Any = None, **_: Any) -> str:
        instance_id = instance_id or uuid.uuid4().hex
        job_from_label(ground_truth, "")  # a bad label fails here, before any generation
        self._remember(self._instances, instance_id, {"label": ground_truth, "turns": 0}, self.max_instances)
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **_: Any
    ) -> tuple[bool, str, float | None, dict[str, Any]]:
        state = self._instances.get(instance_id)
        if state is None:
            raise KeyError(f"no interaction {instance_id!r}: not started, already ended, or evicted")
        answer = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
        [outcome] = await asyncio.to_thread(_judged, [job_from_label(state["label"], str(answer))])
        state["turns"] += 1
        done = state["turns"] >= self.max_turns or outcome.service_fault
        if done:
            del self._instances[instance_id]
        if outcome.service_fault:  # no score: verl leaves a None out of turn_scores; no feedback to go on with
            return True, outcome.feedback, None, outcome_metrics(outcome)
        self._remember(self._last_rewards, instance_id, outcome.reward.reward, self.max_instances)
        return (
            done,
            next_turn(outcome.feedback, self.feedback_chars),
            outcome.reward.reward,
            outcome_metrics(outcome),
        )

    async def calculate_score(self, instance_id: str, **_: Any) -> float:
        """The last judged turn's reward (each turn's reward was already returned by generate_response); raises
        `ServiceFaultError` where no turn was judged."""
        if instance_id not in self._last_rewards:
            raise ServiceFaultError(f"no judged turn in interaction {instance_id!r}")
        return self._last_rewards[instance_id]

    async def finalize_interaction(self, instance_id: str, **_: Any) -> None:
        self._instances.pop(instance_id, None)
        self._last_rewards.pop(instance_id, None)
