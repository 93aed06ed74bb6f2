"""The HTTP bodies around the evaluation schema (`services.schema`), which stays the one definition of a
request's content and of a result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gym_api.store import SubmissionRecord
from gym_common.jobs import JobRecord, JobStatus, Priority
from gym_common.settings import BATCH_MAX_ITEMS
from services.schema import EvalRequest, EvalResult


class EvaluateBody(EvalRequest):
    """A submission: the evaluation request plus where and how urgently to run it."""

    model_config = ConfigDict(extra="forbid")

    device_class: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$",
        description="Which workers run it: `cpu` (Triton interpreter) or a GPU type such as `h100`. "
        "Defaults to the server's `KERNELGYM_DEFAULT_DEVICE_CLASS`.",
    )
    priority: Priority = "normal"
    force: bool = Field(default=False, description="Run again even if an identical submission has a result.")


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[EvaluateBody] = Field(min_length=1, max_length=BATCH_MAX_ITEMS)


class Evaluation(BaseModel):
    """A submission's state; `result` is set once `status` is `done`."""

    id: str = Field(description="This submission's id; identical submissions by others have their own.")
    status: JobStatus
    problem: str
    device_class: str
    priority: Priority
    cached: bool = Field(
        default=False, description="An identical earlier submission's evaluation answers this one (no new run)."
    )
    created: float
    started: float | None = None
    finished: float | None = None
    attempts: int = 0
    result: EvalResult | None = None
    error: str | None = Field(default=None, description="Why the service could not evaluate (status `failed`).")
    status_url: str

    @classmethod
    def of(cls, sub: SubmissionRecord, job: JobRecord) -> Evaluation:
        """A submission as its owner sees it: its job's progress, unless the submission was cancelled."""
        cancelled = sub.cancelled is not None
        return cls(
            id=sub.id,
            status=JobStatus.CANCELLED if cancelled else job.status,
            problem=job.problem,
            device_class=job.device_class,
            priority=job.priority,
            cached=sub.cached,
            created=sub.created,
            started=job.started,
            finished=sub.cancelled if cancelled else job.finished,
            attempts=job.attempts,
            result=None if cancelled else job.result,
            error=None if cancelled else job.error,
            status_url=f"/evaluations/{sub.id}",
        )


class BatchResult(BaseModel):
    evaluations: list[Evaluation]


class ProblemInfo(BaseModel):
    id: str
    source: str | None = None


class ErrorBody(BaseModel):
    detail: str


class ValidationIssue(BaseModel):
    """One invalid field: where (`loc`), what is wrong (`msg`, `type`), and the value when it is a short scalar."""

    loc: list[str | int]
    msg: str
    type: str | None = None
    input: str | int | float | bool | None = None


class ValidationErrorBody(BaseModel):
    """A 422: the fields that failed validation, or one sentence for a check across fields or items (a batch's
    errors name each item by index)."""

    detail: list[ValidationIssue] | str


class Readiness(BaseModel):
    """GET /readyz, 200 or 503 alike; only `ready` and `redis` when Redis does not answer."""

    ready: bool
    redis: str
    workers: int | None = Field(None, description="Healthy workers (Celery nodes, one per GPU).")
    quarantined: int | None = Field(None, description="Workers whose device is quarantined.")
    evaluation_slots: int | None = Field(None, description="Evaluations the healthy workers run at once.")
    device_classes: list[str] | None = Field(None, description="Classes a healthy worker serves.")
    queued: dict[str, int] | None = Field(None, description="Waiting evaluations per device class.")
    unserved: dict[str, int] | None = Field(None, description="Those waiting for a class no healthy worker serves.")
