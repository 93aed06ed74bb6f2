"""`KernelGymClient`: submit kernels, wait for results, cancel, list problems.

with KernelGymClient("http://127.0.0.1:8000", api_key="...") as gym:
    ev = gym.evaluate(candidate_source, problem_id="level1/1_ReLU", wait=60)
    print(ev.status, ev.verdict, ev.speedup)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

FINAL = ("done", "cancelled", "failed")


class KernelGymError(RuntimeError):
    """An HTTP error from the service, with its status code, the service's message and, on a 429 or 503, the
    seconds its `Retry-After` asks the caller to wait."""

    def __init__(self, status_code: int, detail: Any, retry_after: float | None = None):
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the service sends delta-seconds; an HTTP date is not used)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Evaluation:
    """An evaluation as the service reports it; `result` is the full result document once `done`."""

    id: str
    status: str
    cached: bool
    result: dict[str, Any] | None
    error: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, body: dict[str, Any]) -> Evaluation:
        return cls(
            id=body["id"],
            status=body["status"],
            cached=bool(body.get("cached")),
            result=body.get("result"),
            error=body.get("error"),
            raw=body,
        )

    @property
    def finished(self) -> bool:
        return self.status in FINAL

    @property
    def verdict(self) -> str | None:
        return self.result["verdict"] if self.result else None

    @property
    def correct(self) -> bool:
        return bool(self.result and self.result["correct"])

    @property
    def speedup(self) -> float | None:
        return self.result.get("speedup") if self.result else None

    @property
    def coverage(self) -> float | None:
        profile = self.result.get("profile") if self.result else None
        return profile["coverage"] if profile else None

    @property
    def feedback(self) -> str:
        return self.result["feedback"] if self.result else (self.error or "")


class KernelGymClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30.0, retries: int = 3) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Connection failures are retried by the transport; HTTP errors are raised to the caller.
        self.http = httpx.Client(
            base_url=base_url, headers=headers, timeout=timeout, transport=httpx.HTTPTransport(retries=retries)
        )
        self.timeout = timeout

    def __enter__(self) -> KernelGymClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, url: str, wait: float | None = None, **kwargs: Any) -> httpx.Response:
        timeout = self.timeout + (wait or 0.0)
        response = self.http.request(method, url, timeout=timeout, **kwargs)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text
            raise KernelGymError(response.status_code, detail, _retry_after(response.headers.get("retry-after")))
        return response

    @staticmethod
    def submission(
        candidate: str,
        *,
        problem_id: str | None = None,
        reference: str | None = None,
        options: dict[str, Any] | None = None,
        device_class: str | None = None,
        priority: Literal["high", "normal", "low"] = "normal",
        force: bool = False,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"candidate": candidate, "priority": priority, "force": force}
        for key, value in (
            ("problem_id", problem_id),
            ("reference", reference),
            ("options", options),
            ("device_class", device_class),
        ):
            if value is not None:
                body[key] = value
        return body

    def evaluate(
        self,
        candidate: str,
        *,
        wait: float | None = None,
        idempotency_key: str | None = None,
        **submission: Any,
    ) -> Evaluation:
        """Submit one kernel; with `wait`, the service holds the request up to that many seconds for the result."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        params = {"wait": wait} if wait is not None else {}
        body = self.submission(candidate, **submission)
        return Evaluation.of(self._call("POST", "/evaluate", wait, json=body, params=params, headers=headers).json())

    def evaluate_batch(self, items: list[dict[str, Any]], *, wait: float = 0.0) -> list[Evaluation]:
        """`items` are `submission(...)` bodies."""
        body = self._call("POST", "/evaluate/batch", wait, json={"items": items}, params={"wait": wait}).json()
        return [Evaluation.of(e) for e in body["evaluations"]]

    def get(self, evaluation_id: str, *, wait: float = 0.0) -> Evaluation:
        return Evaluation.of(self._call("GET", f"/evaluations/{evaluation_id}", wait, params={"wait": wait}).json())

    def wait(self, evaluation_id: str, timeout: float, poll: float = 30.0) -> Evaluation:
        """Long-poll until the evaluation is final or `timeout` seconds have passed. A 429 or 503 with
        `Retry-After` (a rate limit, Redis restarting) waits as asked and polls again while time is left."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                evaluation = self.get(evaluation_id, wait=max(0.0, min(poll, remaining)))
            except KernelGymError as exc:
                pause = None if exc.retry_after is None else max(exc.retry_after, 0.5)  # never a tight loop
                if pause is None or time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)
                continue
            if evaluation.finished or remaining <= 0:
                return evaluation

    def cancel(self, evaluation_id: str) -> Evaluation:
        return Evaluation.of(self._call("DELETE", f"/evaluations/{evaluation_id}").json())

    def problems(self) -> list[str]:
        return [p["id"] for p in self._call("GET", "/problems").json()]

    def problem(self, problem_id: str) -> str:
        return self._call("GET", f"/problems/{problem_id}").json()["source"]

    def ready(self) -> dict[str, Any]:
        response = self.http.get("/readyz")
        return {"status_code": response.status_code, **response.json()}
