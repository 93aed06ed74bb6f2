"""A reward function for TRL's GRPO trainer: `GRPOTrainer(reward_funcs=[KernelGymReward(...)], ...)`.

TRL (tested with 1.16.0) calls it as `f(prompts=..., completions=..., completion_ids=..., **columns)`, where
`columns` holds every other dataset column (one value per completion) plus TRL's own `trainer_state`,
`log_extra` and `log_metric`. The column named by `label_column` says which problem each row is (see
`common.job_from_label`). The whole batch goes to the service at once, and each completion's reward follows
the reward spec (default `drkernel-pr/v1`).

An answer without usable code scores 0 (the model's fault). A completion that has code but that the service
could not evaluate (submission refused, service unreachable, past the deadline) gets `None`: TRL leaves this
function out of that row's reward instead of counting an infrastructure failure as a wrong kernel.
"""

from __future__ import annotations

from typing import Any

from rl_client.adapters.common import job_from_label
from rl_client.algorithms.rewards import DRKERNEL_PR, RewardSpec
from rl_client.settings import RLSettings

TRL_KWARGS = ("completion_ids", "trainer_state", "log_extra", "log_metric", "environments")


def _content_text(content: Any) -> str:
    """A message's content: a string, or a list of content blocks whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text") or "" for b in content if isinstance(b, dict) and b.get("type") == "text")
    return str(content)


def completion_text(completion: Any) -> str:
    """TRL passes plain strings, or for conversational datasets a list of messages; the answer is the text
    of the assistant messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        parts = [
            _content_text(m.get("content")) for m in completion if isinstance(m, dict) and m.get("role") == "assistant"
        ]
        return "\n".join(parts)
    raise TypeError(f"a completion must be a string or a list of messages, not {type(completion).__name__}")


class KernelGymReward:
    """`f(prompts, completions, **columns) -> list[float | None]`, one reward per completion.

    Inside a TRL trainer it also logs, through TRL's `log_extra` and `log_metric` hooks, each completion's
    verdict and speedup as columns of the completions table, and the batch's correct, rejected and unscored
    shares as metrics (all named after `__name__`)."""

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
        config = RLSettings.from_env(url=url, api_key=api_key, device_class=device_class, timeout_s=timeout_s)
        self.scorer = config.scorer(spec)
        self.last_outcomes: list[dict[str, Any]] = []

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        if self.label_column not in columns:
            data_columns = sorted(k for k in columns if k not in TRL_KWARGS)
            raise KeyError(
                f"the dataset has no {self.label_column!r} column (columns: {data_columns}); "
                "pass label_column= the column holding each row's problem id or reference"
            )
        labels = columns[self.label_column]
        if len(labels) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(labels)} labels")
        answers = [completion_text(c) for c in completions]
        outcomes = self.scorer.score([job_from_label(label, a) for label, a in zip(labels, answers, strict=True)])
        rewards = [None if o.service_fault else o.reward.reward for o in outcomes]
        self.last_outcomes = [
            {"verdict": o.verdict, "speedup": o.speedup, "coverage": o.coverage, "feedback": o.feedback}
            for o in outcomes
        ]
        self._log(columns, outcomes, rewards)
        return rewards

    def _log(self, columns: dict[str, Any], outcomes: list, rewards: list[float | None]) -> None:
        log_extra, log_metric = columns.get("log_extra"), columns.get("log_metric")
        if callable(log_extra):
            log_extra(f"{self.__name__}/verdict", [o.verdict or "unscored" for o in outcomes])
            log_extra(f"{self.__name__}/speedup", [o.speedup for o in outcomes])
        if callable(log_metric) and outcomes:
            n = len(outcomes)
            log_metric(f"{self.__name__}/correct", sum(o.correct for o in outcomes) / n)
            log_metric(f"{self.__name__}/rejected", sum(o.verdict == "rejected" for o in outcomes) / n)
            log_metric(f"{self.__name__}/unscored", sum(r is None for r in rewards) / n)

    def close(self) -> None:
        self.scorer.close()
