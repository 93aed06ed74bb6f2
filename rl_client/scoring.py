"""Turn rewards from the KernelGym service: extract each answer's kernel, submit them in batches, wait for
all of them concurrently, and turn each evaluation into a reward with a named reward spec.

A slow or failed evaluation never stalls the batch: each has its own deadline, after which it is cancelled
and scores 0 with feedback saying so. Such a turn is marked `service_fault`: the answer was never judged, so a
trainer leaves it out rather than learn from a 0 the policy did not earn. The service's back-pressure (429,
503) is waited out as its `Retry-After` asks.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, retry, retry_if_exception, stop_after_attempt, wait_exponential

from gym_client import Evaluation, KernelGymClient, KernelGymError
from rl_client.algorithms.rewards import RewardSpec, TurnReward, turn_reward
from rl_client.prompts import extract_code

log = logging.getLogger("kernelgym.rl")


@dataclass(frozen=True)
class ScoreJob:
    problem_id: str | None
    reference: str | None
    answer: str


@dataclass(frozen=True)
class TurnOutcome:
    reward: TurnReward
    verdict: str | None  # None: never evaluated (no usable code, or the service failed)
    correct: bool
    speedup: float | None
    coverage: float | None
    feedback: str
    evaluation_id: str | None = None
    pending: bool = False  # still running at the deadline and left running (`cancel_late=False`)
    cached: bool = False  # the service answered from an identical earlier submission's evaluation
    service_fault: bool = False  # no verdict, and not for the answer's sake: refused, failed, too late
    flags: tuple[str, ...] = ()  # the service's reasons for human review (e.g. a huge speedup)


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, KernelGymError) and exc.status_code in (429, 502, 503, 504)


_BACKOFF = wait_exponential(multiplier=1, max=30)


def _as_told(state: RetryCallState) -> float:
    """The service's Retry-After where it gave one (a rate limit's window: up to a minute), else back-off."""
    exc = state.outcome.exception() if state.outcome else None
    told = getattr(exc, "retry_after", None)
    return min(told, 60.0) if told is not None else _BACKOFF(state)


class ServiceScorer:
    def __init__(
        self,
        client: KernelGymClient,
        spec: RewardSpec,
        device_class: str | None = None,
        options: dict[str, Any] | None = None,
        timeout_s: float = 1800.0,
        batch_size: int = 64,
        concurrency: int = 32,
        cancel_late: bool = True,
    ):
        """`cancel_late=False` leaves an evaluation that misses the deadline running and marks its outcome
        `pending`: an identical later submission then attaches to it through the service's cache."""
        self.client = client
        self.spec = spec
        self.device_class = device_class
        self.options = options or {}
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self.cancel_late = cancel_late
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kg-score")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def score(self, jobs: list[ScoreJob]) -> list[TurnOutcome]:
        outcomes: list[TurnOutcome | None] = [None] * len(jobs)
        submit: list[tuple[int, dict[str, Any]]] = []
        for i, job in enumerate(jobs):
            extraction = extract_code(job.answer)
            if extraction.code is None:
                outcomes[i] = self._unscored(f"Your answer could not be evaluated: {extraction.problem}.")
                continue
            body = self.client.submission(
                extraction.code,
                problem_id=job.problem_id,
                reference=job.reference,
                options=self.options or None,
                device_class=self.device_class,
            )
            submit.append((i, body))
        deadline = time.monotonic() + self.timeout_s
        pending: list[tuple[int, str, bool]] = []
        for start in range(0, len(submit), self.batch_size):
            chunk = submit[start : start + self.batch_size]
            try:
                evaluations = self._submit([body for _, body in chunk])
            except KernelGymError as exc:
                log.warning("submitting %d evaluations failed: %s", len(chunk), exc)
                for i, _ in chunk:
                    outcomes[i] = self._fault(f"The evaluation service refused the submission ({exc}).")
                continue
            pending.extend((i, ev) for (i, _), ev in zip(chunk, evaluations, strict=True))
        waits = {i: self.pool.submit(self._wait, ev, deadline) for i, ev in pending}
        for i, future in waits.items():
            outcomes[i] = future.result()
        return [o for o in outcomes if o is not None]

    @retry(retry=retry_if_exception(_transient), stop=stop_after_attempt(6), wait=_as_told, reraise=True)
    def _submit(self, bodies: list[dict[str, Any]]) -> list[Evaluation]:
        return self.client.evaluate_batch(bodies, wait=0)

    def _wait(self, submitted: Evaluation, deadline: float) -> TurnOutcome:
        """The outcome of one submission; one answered from the cache is final already and needs no poll."""
        ev, eid = submitted, submitted.id
        if not ev.finished:
            try:
                ev = self.client.wait(eid, timeout=max(0.0, deadline - time.monotonic()))
            except Exception as exc:  # the service went away: this turn is unscored, the batch goes on
                return self._fault(f"The evaluation service failed ({exc}).", eid)
        if not ev.finished and not self.cancel_late:
            return self._fault("not finished yet", eid, pending=True)
        if not ev.finished:
            try:
                self.client.cancel(eid)
            except Exception as exc:
                log.warning("cancelling %s failed: %s", eid, exc)
            return self._fault(f"The evaluation did not finish within {self.timeout_s:.0f} s and was cancelled.", eid)
        if ev.result is None:
            return self._fault(f"The service could not evaluate this answer ({ev.status}: {ev.error}).", eid)
        return TurnOutcome(
            reward=turn_reward(self.spec, ev.verdict, ev.speedup, ev.coverage),
            verdict=ev.verdict,
            correct=ev.correct,
            speedup=ev.speedup,
            coverage=ev.coverage,
            feedback=ev.feedback,
            evaluation_id=eid,
            cached=submitted.cached,
            flags=tuple(ev.result.get("flags") or ()),
        )

    def _unscored(self, feedback: str) -> TurnOutcome:
        """An answer the service could not be asked about (no usable code): the policy's own failure."""
        return TurnOutcome(turn_reward(self.spec, None), None, False, None, None, feedback)

    def _fault(self, feedback: str, evaluation_id: str | None = None, pending: bool = False) -> TurnOutcome:
        return TurnOutcome(
            turn_reward(self.spec, None), None, False, None, None, feedback, evaluation_id, pending, service_fault=True
        )
