"""Trajectories for a cold start (`kernelgym-rl collect`): multi-turn episodes of any model against the service,
written one JSON object per line, and the filter that picks those worth imitating (`kernelgym-rl sft`).

A trajectory is `{"problem", "messages", "turns"}`: `messages` is the chat in the model's roles, from the system
prompt to the last answer, with the service's feedback as the user turns between answers; `turns[k]` is what the
service said of answer k (verdict, speedup, coverage, reward, flags, ...; `rl_client.adapters.common.outcome_dict`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rl_client.adapters.common import outcome_dict
from rl_client.data import Problem
from rl_client.local.policy import LocalPolicy
from rl_client.rollout import Episode, Generate, Messages, run_episodes
from rl_client.scoring import ServiceScorer


def trajectory(episode: Episode, feedback_chars: int) -> dict[str, Any]:
    """One episode as a JSON-ready record; the feedback on the last answer is in its turn, not in `messages`
    (nothing answers it)."""
    return {
        "problem": episode.problem.id,
        "messages": episode.messages(feedback_chars)[:-1],
        "turns": [outcome_dict(turn.outcome) for turn in episode.turns],
    }


def sft_ready(record: dict[str, Any], min_speedup: float | None = None) -> bool:
    """Worth imitating: the last answer passed, no turn was rejected, flagged or left unjudged by a service fault,
    and, with `min_speedup`, the last answer's measured speedup is at least that (none measured: not kept)."""
    turns = record["turns"]
    if not turns or turns[-1]["verdict"] != "passed":
        return False
    if any(t["verdict"] == "rejected" or t["flags"] or t["service_fault"] for t in turns):
        return False
    speedup = turns[-1]["speedup"]
    return min_speedup is None or (speedup is not None and speedup >= min_speedup)


def passed_answers(record: dict[str, Any]) -> list[bool]:
    """Per answer of the trajectory, whether the service passed it: what SFT learns by default (`train_sft`'s
    `learn`), so that a deliberately or accidentally wrong answer is context, not a target."""
    return [turn["verdict"] == "passed" for turn in record["turns"]]


def collect(
    problems: list[Problem],
    samples: int,
    generate: Generate,
    scorer: ServiceScorer,
    turns: int = 3,
    feedback_chars: int = 2000,
) -> list[dict[str, Any]]:
    """`samples` episodes of `turns` turns per problem, as trajectory records."""
    episodes = run_episodes(problems, samples, generate, scorer, turns, feedback_chars)
    return [trajectory(e, feedback_chars) for e in episodes]


def local_generator(policy: LocalPolicy) -> Generate:
    """`generate` from a local Hugging Face model (the sampled text only)."""

    def generate(histories: list[Messages]) -> list[str]:
        return policy.generate(histories)[0]

    return generate


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> int:
    """Write one record per line; returns how many."""
    n = 0
    with Path(path).open("w") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
