"""verl's custom reward function and multi-turn interaction (tested against verl 0.7.1's own loader, reward
loop and tool agent loop). In the trainer config:

    reward.custom_reward_function.path=pkg://rl_client.adapters.verl   # or this file's path
    reward.custom_reward_function.name=compute_score

with `KERNELGYM_URL` (and `KERNELGYM_API_KEY`) in the workers' environment. `ground_truth` is the row's label:
a problem id, a reference source, or JSON with `problem_id` or `reference`. The score is a dict whose `score`
is the reward and whose other numeric entries verl logs as metrics.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import OrderedDict
from typing import Any

from rl_client.adapters.common import job_from_label, outcome_metrics
from rl_client.prompts import next_turn
from rl_client.scoring import ServiceScorer
from rl_client.settings import RLSettings

_lock = threading.Lock()
_scorers: dict[RLSettings, ServiceScorer] = {}


def _scorer() -> ServiceScorer:
    """One scorer (HTTP client and thread pool) per process and configuration."""
    config = RLSettings.from_env()
    with _lock:
        if config not in _scorers:
            _scorers[config] = config.scorer()
        return _scorers[config]


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, **_: Any
) -> dict[str, Any]:
    [outcome] = _scorer().score([job_from_label(ground_truth, solution_str)])
    return outcome_metrics(outcome)


def compute_score_batch(
    data_sources: list[str],
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list[dict[str, Any] | None] | None = None,
    **_: Any,
) -> list[dict[str, Any]]:
    """For verl's batch reward manager: the whole batch is evaluated concurrently."""
    jobs = [job_from_label(gt, sol) for gt, sol in zip(ground_truths, solution_strs, strict=True)]
    return [outcome_metrics(o) for o in _scorer().score(jobs)]


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
    ) -> tuple[bool, str, float, dict[str, Any]]:
        state = self._instances.get(instance_id)
        if state is None:
            raise KeyError(f"no interaction {instance_id!r}: not started, already ended, or evicted")
        answer = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
        [outcome] = await asyncio.to_thread(_scorer().score, [job_from_label(state["label"], str(answer))])
        state["turns"] += 1
        self._remember(self._last_rewards, instance_id, outcome.reward.reward, self.max_instances)
        done = state["turns"] >= self.max_turns
        if done:
            del self._instances[instance_id]
        return (
            done,
            next_turn(outcome.feedback, self.feedback_chars),
            outcome.reward.reward,
            outcome_metrics(outcome),
        )

    async def calculate_score(self, instance_id: str, **_: Any) -> float:
        """The last turn's reward (each turn's reward was already returned by generate_response)."""
        return self._last_rewards.get(instance_id, 0.0)

    async def finalize_interaction(self, instance_id: str, **_: Any) -> None:
        self._instances.pop(instance_id, None)
        self._last_rewards.pop(instance_id, None)
