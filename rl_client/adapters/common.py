"""What every adapter shares: reading a dataset label and reporting an outcome (their scorer comes from
`rl_client.settings.RLSettings`)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from rl_client.scoring import ScoreJob, ServiceScorer, TurnOutcome

log = logging.getLogger(__name__)


class LabelError(ValueError):
    """A label names neither a problem nor a reference."""


class ServiceFaultError(RuntimeError):
    """The service failed to judge an answer (refused, unreachable, past the deadline), and the framework has no
    way to leave the sample out: training on it as a 0 would teach the policy an outage."""


def score_judged(scorer: ServiceScorer, jobs: list[ScoreJob], retries: int, backoff_s: float) -> list[TurnOutcome]:
    """`scorer.score(jobs)`, scoring again the answers the service failed to judge, up to `retries` times with a
    wait of `backoff_s` doubled each time; answers still unjudged keep their `service_fault` outcome."""
    outcomes = scorer.score(jobs)
    for attempt in range(retries):
        faulted = [i for i, o in enumerate(outcomes) if o.service_fault]
        if not faulted:
            break
        log.warning(
            "the service failed to judge %d answer(s) (%s); scoring again", len(faulted), outcomes[faulted[0]].feedback
        )
        time.sleep(backoff_s * 2**attempt)
        for i, outcome in zip(faulted, scorer.score([jobs[i] for i in faulted]), strict=True):
            outcomes[i] = outcome
    return outcomes


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
        "service_fault": outcome.service_fault,
        "flags": list(outcome.flags),
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
        "service_fault": float(outcome.service_fault),
    }
