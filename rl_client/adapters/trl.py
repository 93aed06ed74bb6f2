"""A reward function for TRL's GRPO trainer: `GRPOTrainer(reward_funcs=[KernelGymReward(...)], ...)`.

TRL calls it with the batch's prompts and completions and every dataset column as keyword arguments; the
column named by `label_column` says which problem each row is (see `common.job_from_label`). The whole batch
goes to the service at once, and each completion's reward follows the reward spec (default `drkernel-pr/v1`).
"""

from __future__ import annotations

from typing import Any

from rl_client.adapters.common import AdapterConfig, job_from_label
from rl_client.algorithms.rewards import DRKERNEL_PR, RewardSpec


def completion_text(completion: Any) -> str:
    """TRL passes plain strings, or for conversational datasets a list of messages; the answer is the text
    of the assistant messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        parts = [m.get("content") or "" for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
        return "\n".join(p if isinstance(p, str) else str(p) for p in parts)
    raise TypeError(f"a completion must be a string or a list of messages, not {type(completion).__name__}")


class KernelGymReward:
    """`f(prompts, completions, **columns) -> list[float]`, one reward per completion."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        label_column: str = "label",
        spec: RewardSpec = DRKERNEL_PR,
        device_class: str | None = None,
        timeout_s: float | None = None,
    ):
        self.__name__ = f"kernelgym_{spec.name}"  # TRL logs each reward function under its __name__
        self.label_column = label_column
        config = AdapterConfig.from_env(url=url, api_key=api_key, device_class=device_class, timeout_s=timeout_s)
        self.scorer = config.scorer(spec)
        self.last_outcomes: list[dict[str, Any]] = []

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        if self.label_column not in columns:
            raise KeyError(
                f"the dataset has no {self.label_column!r} column (columns: {sorted(columns)}); "
                "pass label_column= the column holding each row's problem id or reference"
            )
        labels = columns[self.label_column]
        if len(labels) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(labels)} labels")
        jobs = [job_from_label(label, completion_text(c)) for label, c in zip(labels, completions, strict=True)]
        outcomes = self.scorer.score(jobs)
        self.last_outcomes = [
            {"verdict": o.verdict, "speedup": o.speedup, "coverage": o.coverage, "feedback": o.feedback}
            for o in outcomes
        ]
        return [o.reward.reward for o in outcomes]

    def close(self) -> None:
        self.scorer.close()
