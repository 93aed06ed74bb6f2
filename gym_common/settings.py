"""Service settings, read once from `KERNELGYM_*` environment variables (the evaluation core's own
settings are `services.settings.EvalSettings`, under the same prefix)."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Annotated, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

DEVICE_CLASS = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")


# The most items a batch body may hold whatever `batch_max` says: the body's schema stops at this many, so a body
# of many tiny items is refused before they are all validated (they cost the gateway memory and time).
BATCH_MAX_ITEMS = 1024


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KERNELGYM_", extra="ignore")

    # Shared by the gateway and the workers.
    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Broker, job store and cache.")
    key_prefix: str = Field("kg", pattern=r"^[A-Za-z0-9_.-]+$", description="Namespace of every Redis key.")
    job_ttl_s: int = Field(86_400, ge=60, description="How long a job record and its result are kept.")
    cache_ttl_s: int = Field(7 * 86_400, ge=0, description="How long identical requests reuse a result; 0: never.")
    reference_timing_ttl_s: int = Field(
        86_400,
        ge=0,
        description="How long workers reuse a reference's timing (each use revalidates it on fresh calls); 0: never.",
    )
    problems_dir: str | None = Field(None, description="KernelBench-layout problem set; the bundled one if unset.")
    redis_max_connections: int = Field(
        128, ge=4, description="Redis connections per process; requests beyond it wait for a free one."
    )

    # Gateway.
    host: str = Field("127.0.0.1", description="Address `kernelgym serve` binds.")
    port: int = Field(8000, ge=1, le=65535)
    gateway_processes: int = Field(1, ge=1, description="uvicorn worker processes of `kernelgym serve`.")
    log_level: str = Field("INFO", description="Level of the JSON logs of the gateway and the workers.")
    api_key_hashes: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="SHA-256 hex digests of the accepted API keys (`kernelgym hash-key`), as a JSON list.",
    )
    dev_mode: bool = Field(False, description="Accept requests without a key; refused on a non-loopback address.")
    rate_limit_per_minute: int = Field(600, ge=1, description="Requests per API key per minute.")
    max_queued_per_key: int = Field(2_000, ge=1, description="Unfinished evaluations one API key may hold.")
    wait_default_s: float = Field(60.0, ge=0, description="How long POST /evaluate waits for a result by default.")
    wait_max_s: float = Field(300.0, ge=0, description="Upper bound on a request's `wait`.")
    batch_max: int = Field(256, ge=1, le=BATCH_MAX_ITEMS, description="Most evaluations in one POST /evaluate/batch.")
    default_device_class: str = Field("cpu", description="Queue family when a request names none, e.g. `h100`.")
    device_classes: list[str] = Field(
        default_factory=list,
        description="Device classes accepted while no worker serves them (e.g. a pool that scales from zero), "
        "besides the default class; any other class needs a worker that served it within the job TTL.",
    )

    # Workers.
    device_class: str = Field("cpu", description="What this worker serves: `cpu` or a GPU type such as `h100`.")
    max_attempts: int = Field(3, ge=1, description="Deliveries of one evaluation before it is declared crashed.")
    task_time_limit_s: int = Field(1_200, ge=10, description="Hard limit on one task (the core has per-phase ones).")
    visibility_timeout_s: int = Field(
        3_600, ge=10, description="Unacknowledged tasks of a vanished worker are redelivered after this."
    )
    heartbeat_s: float = Field(
        5.0,
        gt=0,
        description="How often a worker renews its liveness key and its running evaluation's lease, and a gateway "
        "looks for lapsed leases; an evaluation whose lease lapses (4 heartbeats) is queued again.",
    )
    result_write_retry_s: float = Field(
        900.0,
        gt=0,
        description="How long a worker retries storing a finished evaluation while Redis is unreachable; past it "
        "the evaluation's lease lapses and a gateway queues it again once Redis is back.",
    )
    reference_failure_ttl_s: int = Field(
        900, ge=0, description="How long an API key's inline reference that failed is refused at once; 0: never."
    )
    reference_failure_window_s: int = Field(
        3_600, ge=60, description="The window over which an API key's failed inline references are counted."
    )
    reference_failure_limit: int = Field(
        2, ge=0, description="Failed inline references an API key may have in the window before it is paused."
    )
    reference_failure_pause_s: int = Field(
        60,
        ge=1,
        description="How long a key past the limit may not send inline references; doubled with each further "
        "failure, at most the window.",
    )
    quarantine_after: int = Field(
        3, ge=1, description="Consecutive infrastructure faults after which a failing probe quarantines a GPU."
    )
    quarantine_probe_s: float = Field(
        60.0, gt=0, description="How often a quarantined worker re-runs its probe; a pass lifts the quarantine."
    )
    worker_concurrency: int = Field(
        2,
        ge=1,
        description="Evaluations in flight per worker (one pool process each); their timing and profiling take "
        "turns in the device's timing slot. The worker runs fewer when the host's cores (four per evaluation, "
        "shared among the host's GPUs) or the GPU's memory (`worker_gpu_memory_mb` per evaluation) allow fewer. "
        "Chosen by measurement (docs/benchmarks.md: one H200, 16 cores, each against a serial worker "
        "in the same run): 2 in flight gave 1.06-1.13x serial on the bundled problems, 1.04x with half the candidates "
        "wrong and 0.90x at KernelBench's published sizes; 4 gave 1.00x, 0.76x and 0.85x. An evaluation is now "
        "mostly requests to the GPU, and more in flight time-slice its contexts (a delivery of outputs took 25 "
        "times as long with 4).",
    )
    worker_gpu_memory_mb: int = Field(
        8192,
        ge=256,
        description="GPU memory to set aside per evaluation in flight (its parent, reference, candidate and warm "
        "children, with their tensors); raise it for problems with large inputs.",
    )
    gpu_lock_dir: str = Field(
        "/tmp/kernelgym-gpu",
        description="Directory of each device's timing-slot lock, quarantine marker and worker lock (one worker "
        "per GPU): every worker that uses a GPU must see the same directory.",
    )
    worker_device_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="The device's name for its lock and marker; `kernelgym worker` sets it to the GPU's UUID "
        "(or `cpu`) when unset.",
    )
    worker_device: Literal["cpu", "cuda"] | None = Field(
        None,
        description="Where this worker evaluates: by default `cpu` for the `cpu` class and `cuda` for any other. "
        "`cpu` with a GPU class runs that class's pipeline, quarantine included, through the interpreter.",
    )

    @field_validator("default_device_class", "device_class")
    @classmethod
    def _device_class(cls, value: str) -> str:
        if not DEVICE_CLASS.match(value):
            raise ValueError("a device class is 1-32 of a-z, 0-9, '_' and '-', e.g. `cpu` or `h100`")
        return value

    @field_validator("device_classes")
    @classmethod
    def _device_classes(cls, value: list[str]) -> list[str]:
        return [cls._device_class(v) for v in value]

    @field_validator("api_key_hashes", mode="before")
    @classmethod
    def _hashes(cls, value: object) -> object:
        expected = (
            "KERNELGYM_API_KEY_HASHES is a JSON list of SHA-256 hex digests (64 lowercase hex characters), "
            """e.g. '["<digest>"]', each from `kernelgym hash-key <key>`"""
        )
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError(expected) from None
        if not isinstance(value, list) or not all(isinstance(h, str) and HEX_DIGEST.match(h) for h in value):
            raise ValueError(expected)
        return value

    def evaluation_device(self) -> Literal["cpu", "cuda"]:
        """Where a worker of these settings evaluates: `cuda` unless told otherwise or serving the `cpu` class."""
        return self.worker_device or ("cpu" if self.device_class == "cpu" else "cuda")

    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


class ConfigurationError(ValueError):
    """A KERNELGYM_* variable is unusable; the message is one line saying what is expected. The one such error
    of the project: the gateway, the workers, the CLI and the RL client raise it (this module imports no torch)."""


S = TypeVar("S", bound=BaseSettings)


def load_settings(cls: type[S], **overrides: object) -> S:
    """`cls` from the environment, with the `overrides` that are not None on top (a command's own options), or a
    ConfigurationError naming each bad variable in one line. A process's entry point calls it once per settings
    class and passes the result down."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    try:
        return cls(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = []
        # A default computed from other fields is not computed once any field is bad: not a problem of its own.
        for error in (e for e in exc.errors() if e["type"] != "default_factory_not_called"):
            variable = f"{prefix}{error['loc'][0]}".upper() if error["loc"] else f"{prefix}*"
            message = error["msg"].removeprefix("Value error, ")
            problems.append(message if message.startswith(variable) else f"{variable}: {message}")
        raise ConfigurationError("; ".join(problems)) from None
    except SettingsError as exc:  # a value that should be JSON and is not
        raise ConfigurationError(str(exc)) from None
