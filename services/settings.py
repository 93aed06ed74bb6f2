"""Evaluation settings, read once from `KERNELGYM_*` environment variables.

Every field here is read by the evaluation core; per-request `EvalOptions` override the first group.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def host_memory_mb(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> int:
    """Memory this host gives its processes, in MiB: the physical memory, or the lowest memory limit of this
    process's cgroup and its ancestors (a container's, a Slurm job's), v2 or v1."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min([physical, *cgroup_memory_limits(proc_cgroup, root)]) >> 20


def cgroup_memory_limits(proc_cgroup: Path, root: Path) -> list[int]:
    """The memory limits (bytes) set on this process's cgroup and each ancestor; `max` (unlimited) is left out."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return []
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one unified hierarchy
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):  # v1: the memory controller's own hierarchy
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        here = base / path.lstrip("/")
        for directory in [here, *here.parents]:
            candidates.append(directory / name)
            if directory == base:
                break
    limits = []
    for path in candidates:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return limits


def default_memory_limit_mb(concurrent_children: int) -> int:
    """Three quarters of the host's memory shared by the children that run at once: children at their limit
    still leave a quarter to the worker, its warm children, Redis and the system (on a 24 GB host with one
    worker: 9 GB each), so the watchdog ends a runaway child before the kernel's OOM killer picks a process."""
    return max(256, host_memory_mb() * 3 // 4 // concurrent_children)


class EvalSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KERNELGYM_", extra="ignore")

    # Defaults a request may override.
    fp32_tol: float = Field(1e-4, description="atol = rtol for fp32/fp64 outputs.")
    half_tol: float = Field(1e-2, description="atol = rtol for fp16/bf16 outputs.")
    correctness_trials: int = Field(5, ge=1)
    timing_budget_s: float = Field(
        10.0,
        gt=0,
        description="Most wall time the adaptive timing loop samples for (GPU): a cap for kernels whose medians "
        "do not reach `target_ci_rel` sooner, not a time every evaluation spends.",
    )
    cpu_timing_budget_s: float = Field(0.5, gt=0, description="CPU mode times only to exercise the path.")

    # Timing protocol.
    warmup_ms: float = Field(
        30.0,
        ge=0,
        description="Warm-up per side, by time, before sampling. On an H200 (docs/benchmarks.md) 30 ms "
        "gave the 96x300 row sum the same speedup as 100 ms (1.471 and 1.467 over 20 evaluations each, CV 1.8% "
        "both) and cut the measurement's median from 0.55 to 0.34 s; 25 ms did not suffice while the "
        "launch shield was a fixed 0.2 ms.",
    )
    min_timed_calls: int = Field(
        20, ge=3, description="Calls a side makes before its median may count as precise (see `min_timed_ms`)."
    )
    min_timed_ms: float = Field(
        250.0,
        ge=0,
        description="Fewer calls than `min_timed_calls` suffice where they last this long (never under 6, the "
        "fewest whose range bounds the median with 95% confidence): at KernelBench's published sizes a timed call "
        "costs ~80 ms of fresh inputs and checks, and twenty calls a side were most of a measurement.",
    )
    timer_resolution_ms: float = Field(
        3.2e-5,
        ge=0,
        description="Tick of the CUDA event timer (~32 ns): half a tick is added to the half-width of a median's "
        "CI, so microsecond-scale samples that fall on a few ticks cannot show a falsely narrow interval.",
    )
    max_timed_calls: int = Field(2000, ge=3)
    target_ci_rel: float = Field(
        0.01, gt=0, description="Stop sampling when every timed median's 95% CI is within ± this share of it."
    )
    target_ci_ticks: float = Field(
        1.6,
        ge=0,
        description="A floor under `target_ci_rel`, in ticks of the event timer (`timer_resolution_ms`): sampling "
        "stops once each median's 95% CI is within the wider of the two. On a 4 µs median a tick is 0.79%, and the "
        "1% target holds only while the interval's bounds are one tick apart: without a floor such kernels sampled "
        "to the 2,000-call cap (10 s) on an H100, their bounds still two ticks apart. 1.6 accepts bounds two ticks "
        "apart (a half-width of 1.5 ticks with the half tick added); 0: no floor (bench/gpu_acceptance.sh part 7 "
        "measures the row sum's repeatability with both).",
    )
    recheck_fraction: float = Field(0.1, ge=0, le=1, description="Share of timed calls re-checked (+ last).")
    digest_inputs_mb: int = Field(
        1024,
        ge=0,
        description="Inputs larger than this (MiB) that the reference leaves unchanged are checked unchanged by "
        "their digest in each child instead of being delivered to the parent: at KernelBench's published sizes "
        "two copies of a 16 GiB input in the parent, beside each child's own, did not fit an 80 GB card.",
    )
    recheck_retain_mb: int = Field(
        256,
        ge=0,
        description="Device memory a candidate child may hold in copies of timed outputs chosen for a re-check, "
        "compared once the measurement has released the timing slot; a chosen output beyond it is compared at "
        "once, inside the measurement (on an H200, a re-check inside it cost ~6.5 ms: 30% of the time a "
        "microsecond-scale kernel's measurement spent per timed call).",
    )
    launch_shield_cycles: int = Field(
        1_000_000,
        ge=0,
        description="GPU spin queued before each start event (~0.5 ms at 2 GHz) so the host's launches, whose "
        "time varies with CPU load, stay outside the timed window for reference and candidate alike. A timed call "
        "whose forward() returns after the spin ended doubles it for the calls after it, up to "
        "`launch_shield_max_cycles`. On an H100 a Triton wrapper's forward() took ~0.2 ms of host time, so a "
        "0.2 ms spin left 10% of a 4.5 us kernel's calls at 60 us.",
    )
    launch_shield_max_cycles: int = Field(
        8_000_000, ge=0, description="The most the launch shield grows to (~4 ms at 2 GHz)."
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
    timing_placements: int = Field(
        3,
        ge=1,
        description="Placements of the inputs in device memory that each side's timed calls are spread over, in the "
        "evaluation's own children, where the tensors are large (`placement_min_mb`); a side's time is its "
        "fastest placement's median. A memory-bound kernel's time depends on which pages its inputs lie on: an honest "
        "KLDivLoss kernel at KernelBench's published size took 0.786-0.992 ms over 32 placements (an H100, "
        "bench/input_placement.py), so one placement's figure moved its speedup by up to 24% between evaluations.",
    )
    placement_min_mb: int = Field(
        256,
        ge=0,
        description="Size of the reference's inputs and output together (MiB) from which both sides are timed over "
        "`timing_placements` placements and the reference in no further process (`reference_processes` applies "
        "below it); the output's placement moves with the inputs'.",
    )
    keep_large_receive_buffers: bool = Field(
        False,
        description="Receive a child's tensors over 1 MiB in buffers of its role's own that the evaluation keeps and "
        "hands out again, so the child keeps their segments mapped (services.parent.receive_arena), rather than in "
        "a new buffer of a pool both roles share, mapped for one copy: an IPC open and close each go through the "
        "host's driver in turn with every GPU's processes. Holds up to an output more of this process's memory.",
    )
    reference_processes: int = Field(
        5,
        ge=1,
        description="Child processes a reference is timed in (GPU) when a timing store keeps the result for the "
        "next candidates (one without a store): a small "
        "torch op's median can differ by process (a 96x300 row sum on an H100: 6.05-6.27 us in some, "
        "6.56-6.85 us in others), so the reference's time is the mean of its per-process medians.",
    )
    reference_min_processes: int = Field(
        3,
        ge=1,
        description="Fewest of those processes: more are timed only while the mean of their medians is less precise "
        "than one median must be (`target_ci_rel`, by a Student-t interval over the processes): three processes "
        "stop there where their medians' standard deviation is under ~0.4% (the row sum's, 6.05-6.85 us, is not).",
    )
    reference_budget_s: float = Field(
        2.0,
        gt=0,
        description="Wall time a new reference's timed calls may take in all the processes it is timed in, each "
        "process an equal share of it (over `reference_processes`), or over its placements (large inputs) in its "
        "one process, where a timing store keeps its figure. A process stops at its share once it has made its "
        "least calls (and visited every placement), however imprecise its own median: what the figure's precision "
        "rests on is the spread of the processes' medians, which more calls in one process cannot narrow. Without "
        "the budget a 96x300 row sum's new reference took 13 s of the timing slot on an H200 (5 processes, each to "
        "the 2,000-call cap).",
    )
    reference_budget_fast_s: float = Field(
        1.0, gt=0, description="`reference_budget_s` for a reference whose calls' median is under 1 ms."
    )
    cpu_reference_processes: int = Field(
        1, ge=1, description="The same in CPU mode, where timings are not meaningful (more only exercise the path)."
    )
    reference_cache_calls: int = Field(
        20, ge=3, description="Most fresh reference calls that must agree with a stored reference timing to reuse it."
    )
    reference_cache_min_calls: int = Field(
        5,
        ge=3,
        description="Fewest of those calls: they stop once the 95% CI of their median lies inside the stored range, "
        "which up to 8 calls means every call does.",
    )
    reference_cache_tolerance: float = Field(
        0.03,
        gt=0,
        description="How far (relative) the median of those calls may be, with 95% confidence, outside the range "
        "of the stored per-process medians before the stored timing counts as drifted and is timed again.",
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
    policy: Literal["default", "strict"] = Field(
        "default",
        description="Defence policy when a request gives none; `strict` also requires custom-kernel coverage and "
        "correctness on changed input sizes (services/hidden_shapes.py).",
    )
    strict_min_coverage: float = Field(0.9, ge=0, le=1, description="Custom-kernel GPU-time share under `strict`.")
    profile_calls: int = Field(3, ge=1, description="Calls profiled for coverage.")
    roofline_margin: float = Field(0.9, gt=0, le=1, description="Reject times below this × the roofline floor.")
    review_speedup: float = Field(10.0, gt=1, description="Speedups above this are flagged for review.")

    # Isolation.
    load_timeout_s: float = Field(120.0, gt=0, description="Import and construction of the models.")
    correctness_timeout_s: float = Field(
        120.0, gt=0, description="The correctness stage, after the load; every candidate call also has its own limit."
    )
    call_limit_floor_s: float = Field(
        5.0,
        gt=0,
        description="A candidate call's time limit on the GPU: this floor plus `call_limit_multiple` x the "
        "reference's time for the same call, extended by Triton compilation within `compile_allowance_s`.",
    )
    call_limit_multiple: float = Field(
        20.0,
        ge=0,
        description="See `call_limit_floor_s`. At 100, a candidate that launched its kernel and then looped forever "
        "held an H100 worker for 24 s: the basis is the reference's first call, lazy initialisation and its FLOP "
        "count included. A correct candidate 20x slower than the reference is still timed, not cut off.",
    )
    cpu_call_limit_floor_s: float = Field(
        30.0,
        gt=0,
        description="The same floor in CPU mode, where the interpreter runs kernels orders of magnitude slower "
        "than torch runs the reference.",
    )
    cpu_call_limit_multiple: float = Field(100.0, ge=0, description="See `cpu_call_limit_floor_s`.")
    compile_allowance_s: float = Field(
        120.0,
        ge=0,
        description="Time in Triton's compiler and autotuner (measured by hooks in the candidate child) that may "
        "extend the candidate's call limits, in all per evaluation: big autotuned kernels compile for tens of s.",
    )
    precompile: bool = Field(
        False,
        description="On a GPU, compile the candidate's Triton kernels in a child that sees no GPU while the models "
        "load (services.parent.precompile), so that its first call, which holds the device, finds them compiled. "
        "Off until measured on a GPU (bench/service_throughput.py --precompile 0,1).",
    )
    precompile_timeout_s: float = Field(
        30.0,
        gt=0,
        description="How long the evaluation waits for the compiler child; past it, the candidate child compiles "
        "what is left itself, as without one (the pass never decides a verdict).",
    )
    precompile_cache_mb: int = Field(
        256, ge=1, description="The most of a compiler child's Triton cache copied into the candidate child's."
    )
    timing_timeout_s: float = Field(180.0, gt=0)
    child_start_timeout_s: float = Field(120.0, gt=0, description="Torch import and device init of a child.")
    device_lock: str = Field(
        "",
        description="The device's timing-slot lock file (services.device_lock), shared by every process that "
        "uses the GPU; a worker sets it. Empty: this process is the device's only user.",
    )
    device_lock_gather_s: float = Field(
        1.0,
        ge=0,
        description="How long a measurement lets other evaluations' requests on the device run on before it "
        "stops them and waits for them to end (at once when the device is idle or another measurement has "
        "stopped them): measurements that arrive meanwhile then share one wait. Chosen with bench/slot_schedule.py.",
    )
    device_evaluations: int = Field(
        1,
        ge=1,
        description="Evaluations in flight on this process's device (a worker sets it from its pool). Each starts "
        "with this share of the device's memory and waits for more where its problem's tensors need it "
        "(services.device_memory).",
    )
    concurrent_children: int = Field(
        2,
        ge=1,
        description="Evaluation children that run at once on this host: 2 per worker (an evaluation's reference "
        "and candidate child), so 2 x the workers that share a host. Sizes the default memory_limit_mb.",
    )
    memory_limit_mb: int = Field(
        default_factory=lambda data: default_memory_limit_mb(data["concurrent_children"]),
        ge=256,
        description="Host memory (RSS) per child process, enforced by the parent's watchdog. Default: 3/4 of the "
        "host's memory (or its cgroup limit) divided by concurrent_children.",
    )
    max_processes: int = Field(64, ge=1, description="Processes a child's session may hold at once.")
    max_file_mb: int = Field(1024, ge=1, description="Largest file a child may write.")
    warm_children: int = Field(4, ge=0, description="Children kept started with torch imported (0: none).")
    child_warm_up_wait_s: float = Field(
        5.0,
        ge=0,
        description="With `device_lock` set, a GPU child creates its CUDA context and loads the harness's device code "
        "only while no measurement waits or runs on its device (it watches /proc/locks and takes no lock): a pool "
        "refilling beside a measurement slowed it (docs/benchmarks.md). This is the longest each step waits.",
    )
    reference_children_kept: int = Field(
        4,
        ge=0,
        description="Idle reference children kept per evaluator for the next candidates of their problems "
        "(services.parent.references), least recently used first out; each holds a CUDA context and its cache. "
        "0: a fresh reference child every evaluation.",
    )
    reference_keep_max_mb: int = Field(
        256,
        ge=0,
        description="Largest tensors (MB, a correctness call's inputs and outputs) after which a reference child is "
        "still kept; one whose tensors passed 256 MB returns its cached device memory first and holds only its "
        "model and CUDA context while idle. The default keeps none of KernelBench's published sizes (gigabytes).",
    )
    fork_children: bool = Field(
        True,
        description="Fork children from a zygote that has imported torch and Triton once (services.zygote), "
        "rather than start each as a fresh interpreter (about 3 s of CPU each).",
    )
    warm_children_max: int = Field(
        8,
        ge=0,
        description="The most children kept started: each time an evaluation finds none ready, one more is kept, "
        "up to this, so that back-to-back evaluations whose children start slower than they are used (two per "
        "evaluation, more when a reference is timed in several processes) stop waiting for them.",
    )
    feedback_max_chars: int = Field(4000, ge=200)

    def for_pool(self, in_flight: int, children_per_evaluation: int) -> EvalSettings:
        """These settings in a worker with `in_flight` evaluations on its device, each running
        `children_per_evaluation` children at once: the device's evaluations, and the children on the host unless
        the environment set that number (the default memory limit follows it)."""
        update: dict[str, object] = {"device_evaluations": in_flight}
        if "concurrent_children" not in self.model_fields_set:
            concurrent_children = children_per_evaluation * in_flight
            update["concurrent_children"] = concurrent_children
            if "memory_limit_mb" not in self.model_fields_set:
                update["memory_limit_mb"] = default_memory_limit_mb(concurrent_children)
        return self.model_copy(update=update)
