"""What every adapter shares: reading a dataset label, and one scorer configured from the environment."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from gym_client import KernelGymClient
from rl_client.algorithms.rewards import DRKERNEL_PR, RewardSpec
from rl_client.scoring import ScoreJob, ServiceScorer, TurnOutcome


class LabelError(ValueError):
    """A label names neither a problem nor a reference."""


def job_from_label(label: Any, answer: str) -> ScoreJob:
    """A label is a problem id (`level1/1_ReLU`), a KernelBench reference source (it defines `class Model`),
    or JSON / a dict with `problem_id` or `reference`."""
    if isinstance(label, str):
        text = label.strip()
        if text.startswith("{"):
            try:
                label = json.loads(text)
            except json.JSONDecodeError as exc:
                raise LabelError(f"label looks like JSON but does not parse: {exc}") from None
        elif "class Model" in text:
            return ScoreJob(problem_id=None, reference=label, answer=answer)
        elif text:
            return ScoreJob(problem_id=text, reference=None, answer=answer)
    if isinstance(label, dict):
        problem_id, reference = label.get("problem_id"), label.get("reference")
        if isinstance(problem_id, str) and problem_id and reference is None:
            return ScoreJob(problem_id=problem_id, reference=None, answer=answer)
        if isinstance(reference, str) and reference and problem_id is None:
            return ScoreJob(problem_id=None, reference=reference, answer=answer)
    raise LabelError(
        "a label must be a problem id, a reference source defining `class Model`, or JSON with exactly one of "
        f"`problem_id` and `reference`; got {str(label)[:120]!r}"
    )


@dataclass(frozen=True)
class AdapterConfig:
    """Read from `KERNELGYM_URL`, `KERNELGYM_API_KEY`, `KERNELGYM_DEVICE_CLASS` and `KERNELGYM_REWARD_TIMEOUT_S`
    when not given: frameworks such as verl call a bare function, so the environment is the only channel."""

    url: str = "http://127.0.0.1:8000"
    api_key: str | None = None
    device_class: str | None = None
    timeout_s: float = 1800.0

    @classmethod
    def from_env(cls, **overrides: Any) -> AdapterConfig:
        env = {
            "url": os.environ.get("KERNELGYM_URL"),
            "api_key": os.environ.get("KERNELGYM_API_KEY"),
            "device_class": os.environ.get("KERNELGYM_DEVICE_CLASS"),
            "timeout_s": float(os.environ["KERNELGYM_REWARD_TIMEOUT_S"])
            if "KERNELGYM_REWARD_TIMEOUT_S" in os.environ
            else None,
        }
        values = {k: v for k, v in env.items() if v is not None}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def scorer(
        self, spec: RewardSpec = DRKERNEL_PR, timeout_s: float | None = None, cancel_late: bool = True
    ) -> ServiceScorer:
        client = KernelGymClient(self.url, api_key=self.api_key, timeout=60)
        return ServiceScorer(
            client,
            spec,
            device_class=self.device_class,
            timeout_s=timeout_s or self.timeout_s,
            cancel_late=cancel_late,
        )


def outcome_dict(outcome: TurnOutcome) -> dict[str, Any]:
    """A turn's reward, its components and the evaluation's headline figures, as plain JSON values."""
    return {
        "score": outcome.reward.reward,
        "correct_reward": outcome.reward.correct,
        "speedup_reward": outcome.reward.speedup,
        "coverage_reward": outcome.reward.coverage,
        "reward_spec": outcome.reward.spec,
        "verdict": outcome.verdict or "unscored",
        "correct": outcome.correct,
        "speedup": outcome.speedup,
        "coverage": outcome.coverage,
        "feedback": outcome.feedback,
        "evaluation_id": outcome.evaluation_id,
    }


def outcome_metrics(outcome: TurnOutcome) -> dict[str, float]:
    """The numeric part of `outcome_dict`, as frameworks log it (averaged over a batch): text stays out, a
    missing figure becomes 0."""
    return {
        "score": outcome.reward.reward,
        "correct_reward": outcome.reward.correct,
        "speedup_reward": outcome.reward.speedup,
        "coverage_reward": outcome.reward.coverage,
        "correct": float(outcome.correct),
        "rejected": float(outcome.verdict == "rejected"),
        "speedup": outcome.speedup or 0.0,
        "coverage": outcome.coverage or 0.0,
    }
