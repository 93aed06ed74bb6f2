"""The HTTP bodies around the evaluation schema (`services.schema`), which stays the one definition of a
request's content and of a result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gym_common.jobs import JobRecord, JobStatus, Priority
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

    items: list[EvaluateBody] = Field(min_length=1)


class Evaluation(BaseModel):
    """An evaluation's state; `result` is set once `status` is `done`."""

    id: str
    status: JobStatus
    problem: str
    device_class: str
    priority: Priority
    cached: bool = Field(default=False, description="An identical earlier submission's evaluation was reused.")
    created: float
    started: float | None = None
    finished: float | None = None
    attempts: int = 0
    result: EvalResult | None = None
    error: str | None = Field(default=None, description="Why the service could not evaluate (status `failed`).")
    status_url: str

    @classmethod
    def of(cls, job: JobRecord, cached: bool = False) -> Evaluation:
        return cls(
            id=job.id,
            status=job.status,
            problem=job.problem,
            device_class=job.device_class,
            priority=job.priority,
            cached=cached,
            created=job.created,
            started=job.started,
            finished=job.finished,
            attempts=job.attempts,
            result=job.result,
            error=job.error,
            status_url=f"/evaluations/{job.id}",
        )


class BatchResult(BaseModel):
    evaluations: list[Evaluation]


class ProblemInfo(BaseModel):
    id: str
    source: str | None = None


class ErrorBody(BaseModel):
    detail: str
