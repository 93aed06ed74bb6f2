"""The messages between the trusted parent and a child: one typed class per command and per reply.

Parent -> child: `Job` once, then `Load`, `Call`, `Time`, `StartProfiler`, `Profile`, `Deliver`, `Recompute` (the
reference only), `Release`, `Exit`; a compiler
child (services.child.compiler) gets `Precompile` alone.
Child -> parent: `Ready` before the job; then, for each command, its reply class or a `Failure`. Every reply
after the job carries the job's nonce, a sequence number (checked by `sandbox.Child`) and, from a child that
runs the defences, the guards' report. The parent validates each reply against the class it expects
(`decode`): a missing field or a wrong type is a ProtocolError, as a broken child, never a KeyError in the
parent. The messages are versioned with the result schema (`PROTOCOL_VERSION`); a child answers a job of
another version with a ProtocolError, so parent and child code never mix across protocol changes.

Plain dataclasses on the child's side (built and encoded with the standard library, whose functions the
guards snapshot); pydantic validation only in the parent.

One side channel: the candidate child publishes the time it has spent in Triton's compiler (and autotuner) in
the file `COMPILE_CLOCK` of its private directory, which the parent reads only when a call's deadline passes,
to extend it by the compilation in progress (within an allowance; see `services.parent.link.CallLimit`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from services.errors import ProtocolError
from services.schema import PROTOCOL_VERSION

Variant = Literal["eager", "compiled"]
Kept = Literal["output", "output2", "inputs", "retained"]
Structure = dict[str, Any]  # services.protocol.tensors.describe's JSON description of a value
Launches = dict[str, int]  # the candidate's own kernels launched by one forward call, by name
COMPILE_CLOCK = ".kg_compile_clock"
START_STAGE = ".kg_start_stage"  # what a starting child is doing: named when it is not ready in time
# Made by the parent in a starting child's directory when an evaluation takes the child before it is ready: its
# evaluation waits for it, so it no longer waits for a gap between measurements.
NEEDED_NOW = ".kg_needed_now"
# The exit status of a starting CUDA child whose context found no device memory (EX_TEMPFAIL): others' evaluations
# filled the device. Trusted only before the child has been given its job, as no user code has run there yet.
START_NO_DEVICE_MEMORY = 75
# In a starting GPU child's environment: "<the device slot's .want file>:<most seconds>", where its context's creation
# and device warm-up each wait for a gap between measurements (EvalSettings.child_warm_up_wait_s).
WARM_UP_BETWEEN = "KERNELGYM_WARM_UP_BETWEEN"
_CLOCK_BYTES = 64


# -- parent -> child ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    cmd: ClassVar[str]


@dataclass(frozen=True)
class Job(Command):
    """What a started child serves, sent once; the candidate's source only to a candidate child."""

    cmd: ClassVar[str] = "job"
    nonce: str
    role: Literal["reference", "candidate", "compiler"]
    device: str
    reference_source: str
    candidate_source: str | None
    init_seed: int
    l2_flush_factor: float
    defences: bool
    protocol: str = PROTOCOL_VERSION


@dataclass(frozen=True)
class Load(Command):
    """Import the reference (and the candidate), construct the model, move it to the device."""

    cmd: ClassVar[str] = "load"


@dataclass(frozen=True)
class Call(Command):
    """A correctness call on inputs from `seed`. `repeat` 2 also runs a second call on fresh copies (the
    determinism check); `poison` lists (dtype, shape) blocks to fill with garbage first; `sizes` replaces size
    globals of the reference module for this call only (hidden sizes); `neutralised` skips every launch of the
    candidate's own kernels during the call (the output-dependence check). `deliver` hands over those parts of
    what the call keeps with the reply, as a `Deliver` would (`buffers`: their tensors in that order), where they
    match the buffers: a request fewer. Only to the reference: the parent's buffers must never be in reach of a
    candidate's code while it runs (a Deliver reaches the child once its call has returned)."""

    cmd: ClassVar[str] = "call"
    seed: int
    repeat: int = 1
    poison: list[tuple[str, list[int]]] = field(default_factory=list)
    count_flops: bool = False
    sizes: dict[str, int] = field(default_factory=dict)
    variant: Variant = "eager"
    neutralised: bool = False
    digest_inputs: bool = False  # report the inputs' digest after the call (a reference always does)
    deliver: list[Kept] = field(default_factory=list)
    buffers: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Time(Command):
    """One timed call on inputs from `seed`, between CUDA events after an L2 flush and a GPU spin of
    `shield_cycles` that keeps the host's launches outside the timed window."""

    cmd: ClassVar[str] = "time"
    seed: int
    variant: Variant = "eager"
    shield_cycles: int = 0
    # First copy the previous timed call's output aside: the parent chose that call for a re-check after it
    # returned, and compares it once the timing slot is released.
    retain_previous: bool = False
    # Then move the inputs to other pages of device memory: free them and the allocator's cache and hold a spacer
    # block sized from the seed, so that this call's inputs and the later calls' lie elsewhere.
    new_placement: bool = False


@dataclass(frozen=True)
class Profile(Command):
    """GPU time per kernel over one call per seed."""

    cmd: ClassVar[str] = "profile"
    seeds: list[int]


@dataclass(frozen=True)
class StartProfiler(Command):
    """One profiler session around no work: a process's first session starts CUPTI and Kineto, driver work that
    waits for other processes' on every GPU of the host. No code of the child's user runs and no kernel is
    launched, so the parent asks it outside its turn of the slot, and `Profile`'s sessions after it start warm."""

    cmd: ClassVar[str] = "start_profiler"


@dataclass(frozen=True)
class Deliver(Command):
    """Hand over the tensors kept from the last call, the parts in `what` in that order (`retained`, alone: the
    outputs copied aside by `Time.retain_previous` at `indices`, in that order): as payloads (CPU) or copied into
    the parent's `buffers` (CUDA IPC descriptors from `services.protocol.tensors.share_cuda`)."""

    cmd: ClassVar[str] = "deliver"
    what: list[Kept]
    buffers: list[dict[str, Any]] | None = None
    indices: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Recompute(Command):
    """To the reference alone: its output for each of `seeds`, one after another, copied into `buffers` where
    every output has the structure they were made for (a measurement's re-checks in one request). Never to a
    candidate: the buffers are the parent's, and its code would run while they are in reach."""

    cmd: ClassVar[str] = "recompute"
    seeds: list[int]
    buffers: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Release(Command):
    """Drop the tensors kept from the last call and those retained; `trim` also returns the child's cached device
    memory, so that more children fit beside it (a KernelBench reference at its published sizes holds ~28 GB)."""

    cmd: ClassVar[str] = "release"
    trim: bool = False


@dataclass(frozen=True)
class Precompile(Command):
    """To a compiler child: run the candidate's forward() once on meta inputs of the published shapes, compiling
    every Triton kernel it launches for a GPU of `capability` (major, minor) and running none."""

    cmd: ClassVar[str] = "precompile"
    capability: tuple[int, int]


@dataclass(frozen=True)
class Exit(Command):
    cmd: ClassVar[str] = "exit"


COMMANDS: dict[str, type[Command]] = {
    c.cmd: c for c in (Job, Load, Call, Time, StartProfiler, Profile, Deliver, Recompute, Release, Precompile, Exit)
}


def command_header(command: Command) -> dict[str, Any]:
    return {"cmd": command.cmd, **dataclasses.asdict(command)}


def parse_command(header: dict[str, Any]) -> Command:
    """A command from the parent (trusted: built by `command_header`)."""
    cls = COMMANDS[header["cmd"]]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in header.items() if k in names})


# -- child -> parent ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    """A started child, torch imported, waiting for its job."""

    pid: int
    network: str  # its namespace, then which sockets it may open (services.child.seccomp.refuse_sockets)
    processes: str = "unknown"  # how its descendants are kept below it (services.child.boot._keep_descendants)
    signals: str = "unknown"  # whether it can signal only itself (services.child.seccomp.confine_signals)
    files: str = "unknown"  # whether it can write only its own directory (services.child.boot._confine_writes)
    capabilities: str = "unknown"  # whether a root child gave up its capabilities (boot._drop_capabilities)
    # When a GPU child waited for a gap between measurements before its context and its device warm-up, as
    # (from, until) on the host's monotonic clock: what remains of its start is the driver work beside measurements.
    waits: list[tuple[float, float]] = field(default_factory=list)
    protocol: str = PROTOCOL_VERSION
    msg: Literal["ready"] = "ready"


@dataclass(frozen=True)
class Reply:
    """Fields every reply after the job carries; the guards' report is None where a child sent none."""

    nonce: str = ""
    seq: int = 0
    ok: bool = True
    compile_total_s: float = 0.0  # the child's time in Triton's compiler so far (candidate only)
    tampered: list[str] | None = None
    flags_changed: dict[str, list[Any]] | None = None
    violations: list[str] | None = None


@dataclass(frozen=True)
class Failure(Reply):
    """User code raised (`compile_error`, `runtime_error`, `reference_error`) or the harness did (`internal`)."""

    ok: bool = False
    error: Literal["compile_error", "runtime_error", "reference_error", "internal"] = "internal"
    context: str = ""
    traceback: str = ""
    out_of_memory: bool = False  # the exception was torch.OutOfMemoryError (the device's memory, maybe shared)


@dataclass(frozen=True)
class Loaded(Reply):
    load_s: float = 0.0
    # The device memory the loaded child holds by its allocator's count (its model, the L2 flush buffer), for the
    # parent's accounting of the device's memory; a child can misstate it, as it could allocate more anyway.
    device_bytes: int = 0


@dataclass(frozen=True)
class Called(Reply):
    """A correctness call: one output structure per repeat, the inputs after the call, and what the guards saw."""

    structures: list[Structure] = field(default_factory=list)
    inputs: Structure = field(default_factory=dict)
    mutated: bool = False
    call_s: float = 0.0
    launches: list[Launches] = field(default_factory=list)
    unstable: bool = False
    flops: float | None = None
    digest: list[int] | None = None
    inputs_digest: list[int] = field(default_factory=list)  # of the inputs after the call (`Call.digest_inputs`)
    delivered: bool = False  # the parts in Call.deliver were handed over
    # Kernel signatures Triton built a C launcher for during the call (candidate, Triton 3.6: services.launchers)
    launchers: list[list[Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Timed(Reply):
    """One timed call: the event time, how much longer a device-wide sync waited than the stream's, the output;
    `covered`: the spin was still running when forward() returned, so every launch was queued before the
    window opened and no host time is in `ms`."""

    ms: float = 0.0
    sync_extra_ms: float = 0.0
    covered: bool = True
    structure: Structure = field(default_factory=dict)
    launches: list[Launches] = field(default_factory=list)
    unstable: bool = False
    digest: list[int] | None = None
    # Seconds of the call in the child: a new placement (the cache freed, the spacer), the fresh inputs (to the
    # device's sync), the call (the L2 flush, the shield, forward(), the early digest, the syncs), the late digest.
    # For the worker's log (where a timed request's time goes); the child says it, so it decides nothing.
    split_s: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Profiled(Reply):
    kernels: list[tuple[str, float, int]] = field(default_factory=list)  # name, GPU µs summed, calls
    launches: list[Launches] = field(default_factory=list)
    # Seconds over the sessions: the profiler's start, the profiled calls, its stop with the events' collection.
    # For the worker's log (where the request's time goes); the child says it, so it decides nothing.
    split_s: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ProfilerStarted(Reply):
    pass


@dataclass(frozen=True)
class Delivered(Reply):
    count: int = 0


@dataclass(frozen=True)
class Recomputed(Reply):
    """The outputs' structures, and whether they went into the buffers (else nothing was handed over, on CUDA)."""

    structures: list[Structure] = field(default_factory=list)
    delivered: bool = False


@dataclass(frozen=True)
class Released(Reply):
    pass


@dataclass(frozen=True)
class Precompiled(Reply):
    """What a compiler child's pass compiled: kernels (autotune configs each count), the C modules Triton builds
    at a first launch (its driver's, and on Triton 3.6 a launcher per kernel signature), and where the pass ended
    early ("" when forward() returned)."""

    kernels: int = 0
    modules: int = 0
    stopped: str = ""


def reply_header(reply: Reply | Ready) -> dict[str, Any]:
    return dataclasses.asdict(reply)


def compile_clock_record(total_s: float, started: float | None) -> bytes:
    """The COMPILE_CLOCK file's content: seconds compiled so far, and the `time.monotonic()` at which the
    compilation in progress started (None when none is)."""
    return json.dumps([total_s, started]).encode().ljust(_CLOCK_BYTES)


def read_compile_clock(directory: str) -> tuple[float, float | None]:
    """What a child published in COMPILE_CLOCK; (0, None) for anything unreadable (the candidate can write it)."""
    try:
        with open(os.path.join(directory, COMPILE_CLOCK), "rb") as f:
            total, started = json.loads(f.read(_CLOCK_BYTES))
        return max(0.0, float(total)), None if started is None else float(started)
    except (OSError, ValueError, TypeError):
        return 0.0, None


def read_start_stage(directory: str) -> str:
    """The step a starting child last wrote to START_STAGE, for the error when it is not ready in time ("" if
    unreadable). Informational only: nothing is decided on it."""
    try:
        with open(os.path.join(directory, START_STAGE), "rb") as f:
            return f.read(80).decode(errors="replace").strip()
    except OSError:
        return ""


R = TypeVar("R")

# Fields a reply of each class must carry (besides the envelope); a reply that lacks one is malformed.
_REQUIRED: dict[type, tuple[str, ...]] = {
    Ready: ("pid", "network", "protocol", "msg"),
    Failure: ("error", "context", "traceback"),
    Loaded: ("load_s", "device_bytes"),
    Called: ("structures", "inputs", "mutated", "launches", "unstable"),
    Timed: ("ms", "structure", "launches", "unstable"),
    Profiled: ("kernels", "launches"),
    ProfilerStarted: (),
    Delivered: ("count",),
    Recomputed: ("structures", "delivered"),
    Released: (),
    Precompiled: ("kernels", "modules", "stopped"),
}


@functools.cache
def _adapter(cls: type) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def decode(cls: type[R], header: dict[str, Any]) -> R:
    """Validate a child's message as `cls` (in the parent): any missing or mistyped field is a ProtocolError."""
    from pydantic import ValidationError

    missing = [name for name in _REQUIRED[cls] if name not in header]
    if missing:
        raise ProtocolError(f"{cls.__name__} without {', '.join(missing)}")
    try:
        return _adapter(cls).validate_python(header)
    except ValidationError as exc:
        raise ProtocolError(f"malformed {cls.__name__}: {exc.errors()[0]['msg']}") from None


def decode_reply(cls: type[R], header: dict[str, Any]) -> R | Failure:
    """The reply to a command: `cls` when the child says ok, else its Failure."""
    return decode(cls, header) if header.get("ok", False) is True else decode(Failure, header)
