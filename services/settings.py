"""Evaluation settings, read once from `KERNELGYM_*` environment variables.

Every field here is read by the evaluation core; per-request `EvalOptions` override the first group.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EvalSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KERNELGYM_", extra="ignore")

    # Defaults a request may override.
    fp32_tol: float = Field(1e-4, description="atol = rtol for fp32/fp64 outputs.")
    half_tol: float = Field(1e-2, description="atol = rtol for fp16/bf16 outputs.")
    correctness_trials: int = Field(5, ge=1)
    timing_budget_s: float = Field(2.0, gt=0, description="Wall budget of the adaptive timing loop (GPU).")
    cpu_timing_budget_s: float = Field(0.5, gt=0, description="CPU mode times only to exercise the path.")

    # Timing protocol.
    warmup_ms: float = Field(100.0, ge=0, description="Warm-up per side, by time, before sampling.")
    min_timed_calls: int = Field(20, ge=3)
    min_timed_ms: float = Field(
        50.0,
        ge=0,
        description="Summed sample time per side before the CI may stop sampling: event timers tick in "
        "~32 ns steps, so a few microsecond-scale samples can show a falsely narrow interval.",
    )
    max_timed_calls: int = Field(2000, ge=3)
    target_ci_rel: float = Field(0.01, gt=0, description="Stop when the median's 95% CI is within this.")
    recheck_fraction: float = Field(0.1, ge=0, le=1, description="Share of timed calls re-checked (+ last).")
    launch_shield_cycles: int = Field(
        400_000,
        ge=0,
        description="GPU spin queued before each start event (~0.2 ms at 2 GHz) so host launch latency, which "
        "varies with CPU wake-up, stays outside the timed window for reference and candidate alike.",
    )
    l2_flush_factor: float = Field(2.0, ge=1, description="L2 flush buffer, in multiples of the L2 size.")
    side_stream_slack_ms: float = Field(
        0.05,
        ge=0,
        description="How much longer a device-wide sync may wait after a candidate's call than the "
        "reference's before the work counts as left running on another stream.",
    )
    confirm_calls: int = Field(
        30,
        ge=3,
        description="Fresh calls per side that must confirm a wall-clock or side-stream excess before it rejects.",
    )
    reference_cache_calls: int = Field(
        20, ge=3, description="Fresh reference calls that must agree with a stored reference timing to reuse it."
    )
    reference_cache_tolerance: float = Field(
        0.05, gt=0, description="Largest relative difference between those calls' median and the stored median."
    )
    wall_slack_ms: float = Field(
        1.0,
        ge=0,
        description="Per-call time the candidate may spend outside its events beyond the reference. Honest "
        "kernels on an H100 showed up to 0.6 ms (a candidate child's per-call overhead sometimes sits ~0.55 ms "
        "above the reference child's for a whole evaluation), so 0.5 ms rejected some of them.",
    )

    # Reward-hacking defences.
    defences: bool = Field(
        True, description="False turns the reward-hacking defences off; only for measuring what they cost."
    )
    hidden_sizes: bool = Field(
        True,
        description="Also check correctness on smaller, unaligned variants of the problem's input sizes "
        "(part of the defences; see services/hidden_shapes.py).",
    )
    policy: Literal["default", "strict"] = Field("default", description="Defence policy when a request gives none.")
    strict_min_coverage: float = Field(0.9, ge=0, le=1, description="Custom-kernel GPU-time share under `strict`.")
    profile_calls: int = Field(3, ge=1, description="Calls profiled for coverage.")
    roofline_margin: float = Field(0.9, gt=0, le=1, description="Reject times below this × the roofline floor.")
    review_speedup: float = Field(10.0, gt=1, description="Speedups above this are flagged for review.")

    # Isolation.
    load_timeout_s: float = Field(120.0, gt=0, description="Import, construction and first (compiling) call.")
    correctness_timeout_s: float = Field(120.0, gt=0)
    timing_timeout_s: float = Field(180.0, gt=0)
    child_start_timeout_s: float = Field(120.0, gt=0, description="Torch import and device init of a child.")
    memory_limit_mb: int = Field(32768, ge=256, description="Host memory (RSS) per child process.")
    max_processes: int = Field(64, ge=1, description="Processes a child's session may hold at once.")
    max_file_mb: int = Field(1024, ge=1, description="Largest file a child may write.")
    warm_children: int = Field(4, ge=0, description="Children kept started with torch imported.")
    feedback_max_chars: int = Field(4000, ge=200)
