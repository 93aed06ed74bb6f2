"""The one definition of an evaluation request and its result.

Torch-free on purpose: the gateway and any client import it to validate and publish the contract
(OpenAPI). Every result names the protocol version that produced it; bump it whenever tolerances,
seeding, the timing method or the defences change, so results from different protocols never mix.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

PROTOCOL_VERSION = "kernelgym-eval/2"

MAX_SOURCE_BYTES = 256 * 1024


class Verdict(StrEnum):
    """Exactly one per result. `rejected` is reserved for reward-hacking defences."""

    PASSED = "passed"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"


DeviceName = Literal["cuda", "cpu"]


class EvalOptions(BaseModel):
    """Per-evaluation knobs; `None` means the server's configured default."""

    model_config = ConfigDict(extra="forbid")

    device: DeviceName | None = None
    atol: float | None = Field(default=None, gt=0, le=1.0)
    rtol: float | None = Field(default=None, gt=0, le=1.0)
    correctness_trials: int | None = Field(default=None, ge=1, le=100)
    timing: bool = True
    timing_budget_s: float | None = Field(default=None, gt=0, le=120)
    compare_compile: bool = False
    profile: bool = True
    policy: Literal["default", "strict"] | None = Field(
        default=None,
        description="Defence policy: `strict` also requires custom-kernel coverage >= 0.9 and correctness on "
        "changed input sizes (by default only the published sizes count).",
    )


# A request names its reference one way: its source, or a problem id (stated in the JSON schema too, for clients
# generated from it).
_ONE_REFERENCE = {
    "oneOf": [{"required": [name], "properties": {name: {"type": "string"}}} for name in ("reference", "problem_id")]
}


class EvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_ONE_REFERENCE)

    candidate: str = Field(min_length=1, max_length=MAX_SOURCE_BYTES, description="Source defining ModelNew.")
    reference: str | None = Field(
        default=None, max_length=MAX_SOURCE_BYTES, description="KernelBench-format source defining Model."
    )
    problem_id: str | None = Field(default=None, max_length=256, description="Id in a loaded problem set.")
    options: EvalOptions = Field(default_factory=EvalOptions)

    @model_validator(mode="after")
    def _one_reference(self) -> EvalRequest:
        for name in ("candidate", "reference"):
            value = getattr(self, name)
            if value is not None and len(value.encode()) > MAX_SOURCE_BYTES:
                raise ValueError(f"`{name}` is larger than {MAX_SOURCE_BYTES} bytes of UTF-8")
        if (self.reference is None) == (self.problem_id is None):
            raise ValueError("give exactly one of `reference` (source) or `problem_id`")
        return self


class CheckName(StrEnum):
    """Every name a `Check` can have: one place to look a check up, and no typo can invent one. The static rules
    are `static_<finding code>` (services.static.RULES); docs/security.md describes each."""

    # correctness (services.parent.correctness)
    OUTPUTS_MATCH = "outputs_match"
    OUTPUT_STRUCTURE = "output_structure"
    OUTPUT_EXACT_TYPE = "output_exact_type"
    INPUTS_UNCHANGED = "inputs_unchanged"
    DETERMINISTIC = "deterministic"
    HIDDEN_SIZES = "hidden_sizes"
    # a call with no reply in its time (services.parent.link)
    TIME_LIMIT = "time_limit"
    # what the candidate child's guards report, and what the parent sees of its process
    HARNESS_INTEGRITY = "harness_integrity"
    NUMERIC_FLAGS = "numeric_flags"
    SANDBOX_VIOLATION = "sandbox_violation"
    OUTPUT_STABLE_AFTER_RETURN = "output_stable_after_return"
    NO_NEW_THREADS = "no_new_threads"
    NO_CHILD_PROCESSES = "no_child_processes"
    CUSTOM_KERNEL_LAUNCHED = "custom_kernel_launched"
    # timing and what follows it (services.parent.defences, dependence, profile)
    TIMING_WALL_CLOCK = "timing_wall_clock"
    NO_SIDE_STREAM_WORK = "no_side_stream_work"
    TIMED_OUTPUT_RECHECK = "timed_output_recheck"
    ROOFLINE_FLOOR = "roofline_floor"
    CUSTOM_KERNEL_COVERAGE = "custom_kernel_coverage"
    OUTPUT_DEPENDS_ON_KERNELS = "output_depends_on_kernels"
    # static triage before anything runs (services.static), one per finding code
    STATIC_NO_TRITON_KERNEL = "static_no_triton_kernel"
    STATIC_FORBIDDEN_IMPORT = "static_forbidden_import"
    STATIC_PROCESS_SPAWN = "static_process_spawn"
    STATIC_ENV_MUTATION = "static_env_mutation"
    STATIC_PACKAGE_INSTALL = "static_package_install"
    STATIC_TIMER_PATCH = "static_timer_patch"
    STATIC_TENSOR_SUBCLASS = "static_tensor_subclass"
    STATIC_NUMERIC_FLAG_CHANGE = "static_numeric_flag_change"
    STATIC_PRECISION_DOWNGRADE = "static_precision_downgrade"
    STATIC_TORCH_COMPUTE_IN_FORWARD = "static_torch_compute_in_forward"
    STATIC_EXCEPTION_FALLBACK = "static_exception_fallback"
    STATIC_RESULT_CACHE = "static_result_cache"
    STATIC_THREADING = "static_threading"
    STATIC_SIDE_STREAM = "static_side_stream"
    STATIC_CUDA_GRAPH = "static_cuda_graph"
    STATIC_DYNAMIC_CODE = "static_dynamic_code"
    STATIC_FRAME_INTROSPECTION = "static_frame_introspection"
    STATIC_FILE_IO = "static_file_io"

    @classmethod
    def static(cls, code: str) -> CheckName:
        """The check of a static finding code; ValueError for a code no member names."""
        return cls(f"static_{code}")


Measure = bool | int | float | str


class Check(BaseModel):
    """One verification step. `name` is a stable machine-readable code; advisory checks (static triage)
    are reported but never change the verdict. The check that decided a `rejected` or `timeout` verdict
    records what triggered it in `measured` and `thresholds`, so a reward can be audited from the result."""

    # A plain string in the JSON schema, as before the enum: clients keep reading names they do not know yet.
    name: Annotated[CheckName, WithJsonSchema({"type": "string", "title": "Name"})]
    passed: bool
    detail: str = ""
    advisory: bool = False
    stood_down: bool = Field(
        default=False,
        description="The check was not applied: the problem's own reference fails it, so it is no evidence "
        "against a candidate (`detail` says why).",
    )
    measured: dict[str, Measure] = Field(
        default_factory=dict,
        description='What the check observed, by quantity, units in the name: `{"excess_ms": 0.61}`.',
    )
    thresholds: dict[str, Measure] = Field(
        default_factory=dict,
        description='The limits the observations were held to, named like them: `{"excess_ms": 1.05}`.',
    )

    @field_validator("measured", "thresholds")
    @classmethod
    def _json_safe(cls, values: dict[str, Measure]) -> dict[str, Measure]:
        """Non-finite floats as text (`"inf"`, `"nan"`): JSON has no such numbers, and a result must come
        back from the service as it was sent."""
        return {k: str(v) if isinstance(v, float) and not math.isfinite(v) else v for k, v in values.items()}


class KernelTime(BaseModel):
    name: str
    time_us: float = Field(description="GPU time summed over the profiled calls.")
    calls: int
    share: float = Field(description="Share of all GPU kernel time in the profiled calls.")
    custom: bool = Field(description="Launched from a @triton.jit function the candidate defines.")


class ProfileSummary(BaseModel):
    """Where the candidate's GPU time goes; `coverage` feeds profiling-based rewards."""

    coverage: float = Field(description="Custom-kernel GPU time / all GPU kernel time (GPU time only).")
    custom_kernels: list[str]
    calls_profiled: int
    top_kernels: list[KernelTime]


class RuntimeStats(BaseModel):
    """Statistics of per-call times (ms), reduced in the trusted parent from raw samples. A side timed in several
    groups of calls reports, for a reference in several child processes, the mean of their medians as `median_ms`
    with that mean's CI; for large inputs timed in several placements in device memory, the fastest placement's
    median with its CI, spread and extremes (a placement can slow a kernel, not speed it up)."""

    median_ms: float = Field(
        description="Median per-call time; over processes, the mean of their medians; over placements, the fastest's."
    )
    iqr_ms: float
    mean_ms: float
    min_ms: float
    trials: int = Field(description="Timed calls, every group's.")
    ci95_low_ms: float
    ci95_high_ms: float
    ci95_rel_halfwidth: float | None = Field(
        description="Half-width of the 95% CI of `median_ms` over it, as reached (None under 3 trials)."
    )
    ci95_target_rel: float | None = Field(
        default=None,
        description="The half-width the adaptive timing aimed for; a reached width above it means sampling "
        "stopped at its cap (calls or wall time). None where no target applied (CPU mode).",
    )
    processes: int = Field(
        default=1,
        description="Groups of calls behind these statistics: child processes (a reference with small inputs), "
        "placements of the inputs (either side, large inputs).",
    )
    process_medians_ms: list[float] = Field(default_factory=list, description="Each group's median.")
    launch_shield_cycles: int = Field(
        default=0, description="The GPU spin before each timed call's window, as it grew to cover the launches."
    )
    uncovered_calls: int = Field(
        default=0,
        description="Timed calls whose forward() returned after the spin ended: some host time may be in them.",
    )


class CorrectnessSummary(BaseModel):
    trials_run: int
    trials_passed: int
    atol: float
    rtol: float
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatched_elements: int = 0
    total_elements: int = 0


class Environment(BaseModel):
    device: DeviceName
    gpu_name: str | None = None
    gpu_uuid: str | None = Field(
        default=None,
        description="Which of a host's GPUs ran the evaluation: its UUID, the same under any CUDA_VISIBLE_DEVICES, "
        "so that timings can be compared GPU by GPU.",
    )
    driver: str | None = None
    cuda: str | None = None
    torch: str
    triton: str
    python: str
    protocol_version: str = PROTOCOL_VERSION
    network_isolation: str = Field(description="How the candidate child was cut off from the network.")
    containment: str = Field(
        default="unknown",
        description="How the candidate child's processes, signals and file writes were confined "
        "(docs/security.md), as the child reported it.",
    )


class EvalResult(BaseModel):
    protocol_version: str = PROTOCOL_VERSION
    problem: str = Field(description="Problem id, or the reference's file name.")
    verdict: Verdict
    compiled: bool
    correct: bool
    speedup: float | None = Field(default=None, description="Reference eager median / candidate median.")
    speedup_vs_compile: float | None = None
    timing_meaningful: bool = Field(description="False on CPU (interpreter): no speedup is reported.")
    candidate_runtime: RuntimeStats | None = None
    reference_runtime: RuntimeStats | None = None
    reference_compile_runtime: RuntimeStats | None = None
    correctness: CorrectnessSummary | None = None
    checks: list[Check] = Field(default_factory=list)
    profile: ProfileSummary | None = None
    flags: list[str] = Field(default_factory=list, description="Reasons for human review, e.g. huge speedups.")
    timings_from_cache: list[str] = Field(
        default_factory=list,
        description="Reference sides (`reference`, `compiled`) whose statistics came from stored timings, "
        "after fresh calls in this evaluation agreed with them.",
    )
    feedback: str = ""
    phases: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds spent per phase. Some parts overlap others: `timing_warm_up`, `timing_revalidation`, "
        "`timing_sampling` and `timing_checks` split the evaluation's own hold of the device within `timing`, and "
        "`timing_reference_processes` is its hold while it times a new reference in more processes; "
        "`timing_rechecks` (the re-checked calls, after the hold), `timing_reference_release` (giving back the "
        "device memory those processes do not need) and `timing_reference_starts` (starting and loading them, "
        "and waiting for the slot between them; `timing_reference_waits` is its waiting for other evaluations' "
        "measurements) are within `timing` too, and so is `timing_reference_calls` (the wall time of the "
        "reference's own timed calls, in every process it was timed in, where it was timed rather than stored); "
        "`first_call` is the candidate's first request (its compilation included), within `compile` plus "
        "`correctness`; `start_ready_wait` (children still starting) and `start_drain` (children closed before, "
        "still exiting) are within `start`; `reference_wait`, beside `timing`, waited for another evaluation's "
        "timing of the same new reference. `total` is the stages' time; `closing` (giving back the parent's buffers "
        "for the children's tensors and waiting for the children to be gone) comes on top, and on a shared GPU "
        "`memory_wait` (waiting for a share of its memory) and `earlier_attempts` (attempts that started again "
        "with more).",
    )
    environment: Environment

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed and not c.advisory]
