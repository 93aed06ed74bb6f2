"""The KernelGym environment as an OpenRLHF agent: `--train.agent_func_path rl_client/openrlhf_agent.py`.

Each episode is `KERNELGYM_RL_MAX_TURNS` turns (default 3). Every answer is evaluated by the service; the step
reward is the turn's reward under the `drkernel-pr/v1` spec and the service's feedback becomes the next user
turn. OpenRLHF sums the step rewards into one scalar per trajectory and keeps only the last step's
`extra_logs`, so every step reports all K turns (`turn_reward_1..K`, `turn_correct_k`, `turn_coverage_k`,
`turn_speedup_k`, `turn_fault_k`; zeros and −1 for turns not played yet) and `num_turns`, from which the
turn-level estimator (`rl_client.openrlhf_trloo`) recovers them in the trainer.

A turn the service failed to judge (`service_fault`: refused, unreachable, past the deadline) is scored again,
KERNELGYM_RL_FAULT_RETRIES times with a doubling wait from KERNELGYM_RL_FAULT_BACKOFF_S. If it still fails, it is
never a 0 to train on: under TRLOO it is reported as `turn_fault_k` and its trajectory leaves the loss and the
baselines; OpenRLHF's own estimators cannot leave a trajectory out, so there the episode raises `ServiceFault`.

OpenRLHF instantiates agents with no arguments inside its Ray actors, so configuration comes from the
environment, through `rl_client.settings.RLSettings`: KERNELGYM_URL, KERNELGYM_API_KEY, KERNELGYM_RL_DEVICE_CLASS,
KERNELGYM_RL_TIMEOUT_S (per evaluation; OpenRLHF itself imposes none on agents), KERNELGYM_RL_MAX_TURNS,
KERNELGYM_RL_FEEDBACK_CHARS and KERNELGYM_RL_TURN_FORMAT, the chat-template text around a feedback turn (default
ChatML, as Qwen uses).
The label of each prompt is the service's problem id, or JSON `{"reference": "<source>"}`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from rl_client.adapters.common import score_judged
from rl_client.prompts import next_turn
from rl_client.scoring import ScoreJob, ServiceScorer, TurnOutcome
from rl_client.settings import RLSettings

_scorer: ServiceScorer | None = None
_lock = threading.Lock()


class ServiceFault(RuntimeError):
    """The service failed to judge a turn after every retry, and the estimator cannot leave it out."""


def scorer() -> ServiceScorer:
    """One client and scorer per process (per Ray actor), shared by its agents."""
    global _scorer
    with _lock:
        if _scorer is None:
            _scorer = RLSettings.from_env().scorer()
        return _scorer


def parse_label(label: Any) -> tuple[str | None, str | None]:
    """(problem_id, reference source) from a prompt's label."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        data = json.loads(label)
        return data.get("problem_id"), data.get("reference")
    if isinstance(label, dict):
        return label.get("problem_id"), label.get("reference")
    return str(label), None


class KernelAgent(AgentInstanceBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings = RLSettings.from_env()
        self.settings = settings
        self.max_turns = settings.max_turns
        self.feedback_chars = settings.feedback_chars
        self.turn_format = settings.turn_format
        # Every key for every turn from the start: OpenRLHF concatenates the logs of many trajectories key by key,
        # so a key that only some trajectories have (one that stopped early) would misalign the batch.
        self.logs: dict[str, float] = {"num_turns": 0.0}
        for k in range(1, self.max_turns + 1):
            self.logs.update(self.turn_logs(k, reward=0.0, correct=False, coverage=None, speedup=None))
        self.turn = 0
        self.problem_id: str | None = None
        self.reference: str | None = None

    @staticmethod
    def turn_logs(
        k: int, reward: float, correct: bool, coverage: float | None, speedup: float | None, fault: bool = False
    ) -> dict[str, float]:
        """Turn k's entries of `extra_logs`; −1 stands for an unknown coverage or speedup."""
        return {
            f"turn_reward_{k}": reward,
            f"turn_correct_{k}": float(correct),
            f"turn_coverage_{k}": -1.0 if coverage is None else coverage,
            f"turn_speedup_{k}": -1.0 if speedup is None else speedup,
            f"turn_fault_{k}": float(fault),
        }

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.problem_id, self.reference = parse_label(states.get("label"))
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.turn += 1
        outcome = await self.judge(ScoreJob(self.problem_id, self.reference, states["action_text"]))
        if outcome.service_fault and self.settings.trainer.estimator != "trloo":
            raise ServiceFault(f"the service failed to judge turn {self.turn}: {outcome.feedback}")
        k = self.turn
        self.logs.update(
            self.turn_logs(
                k, outcome.reward.reward, outcome.correct, outcome.coverage, outcome.speedup, outcome.service_fault
            )
        )
        self.logs["num_turns"] = float(k)
        done = k >= self.max_turns
        feedback = "" if done else self.turn_format.format(feedback=next_turn(outcome.feedback, self.feedback_chars))
        reward = torch.tensor(outcome.reward.reward)
        return {
            "rewards": reward,
            "scores": reward,
            "environment_feedback": feedback,
            "done": done,
            "extra_logs": dict(self.logs),
        }

    async def judge(self, job: ScoreJob) -> TurnOutcome:
        """The turn's outcome, scored again while the service fails to judge it (see the module docstring)."""
        retries, wait = self.settings.fault_retries, self.settings.fault_backoff_s
        [outcome] = await asyncio.to_thread(score_judged, scorer(), [job], retries, wait)
        return outcome


class AgentExecutor(MultiTurnAgentExecutor):
    def __init__(self) -> None:
        super().__init__(KernelAgent)
