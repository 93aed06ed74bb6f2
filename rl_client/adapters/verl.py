"""verl's custom reward function: in the trainer config,

    custom_reward_function.path=<site-packages>/rl_client/adapters/verl.py
    custom_reward_function.name=compute_score          # or compute_score_batch with the batch reward manager

with `KERNELGYM_URL` (and `KERNELGYM_API_KEY`) in the workers' environment. `ground_truth` is the row's label:
a problem id, a reference source, or JSON with `problem_id` or `reference`. The score is a dict whose `score`
is the reward and whose other numeric entries verl logs as metrics.
"""

from __future__ import annotations

import threading
from typing import Any

from rl_client.adapters.common import AdapterConfig, job_from_label, outcome_dict
from rl_client.scoring import ServiceScorer

_lock = threading.Lock()
_scorers: dict[AdapterConfig, ServiceScorer] = {}


def _scorer() -> ServiceScorer:
    """One scorer (HTTP client and thread pool) per process and configuration."""
    config = AdapterConfig.from_env()
    with _lock:
        if config not in _scorers:
            _scorers[config] = config.scorer()
        return _scorers[config]


def _metrics(outcome: dict[str, Any]) -> dict[str, Any]:
    """verl averages numeric entries across the batch; text stays out, a missing figure becomes 0."""
    return {
        "score": outcome["score"],
        "correct_reward": outcome["correct_reward"],
        "speedup_reward": outcome["speedup_reward"],
        "coverage_reward": outcome["coverage_reward"],
        "correct": float(outcome["correct"]),
        "rejected": float(outcome["verdict"] == "rejected"),
        "speedup": outcome["speedup"] or 0.0,
        "coverage": outcome["coverage"] or 0.0,
    }


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, **_: Any
) -> dict[str, Any]:
    [outcome] = _scorer().score([job_from_label(ground_truth, solution_str)])
    return _metrics(outcome_dict(outcome))


def compute_score_batch(
    data_sources: list[str],
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list[dict[str, Any] | None] | None = None,
    **_: Any,
) -> list[dict[str, Any]]:
    """For verl's batch reward manager: the whole batch is evaluated concurrently."""
    jobs = [job_from_label(gt, sol) for gt, sol in zip(ground_truths, solution_strs, strict=True)]
    return [_metrics(outcome_dict(o)) for o in _scorer().score(jobs)]
