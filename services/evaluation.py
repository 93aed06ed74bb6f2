"""What `Evaluator.evaluate` returns: the result, and the diagnostics a worker logs beside it.

Torch-free, like the schema: the diagnostics say how an evaluation ran (which children it used, what the compiler
child did, where its requests went), never what it decided; the result alone carries the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from services.schema import EvalResult


@dataclass
class PrecompileOutcome:
    """What the compiler child's pass did (services.parent.precompile); reported, never judged."""

    kernels: int = 0  # compiled by the pass (each autotune config counts)
    modules: int = 0  # C modules built: Triton's driver module, and on Triton 3.6 a launcher per kernel signature
    copied_files: int = 0  # into the candidate child's cache
    stopped: str = ""  # where the pass ended early, or why it gave nothing; "" when forward() returned


@dataclass
class Diagnostics:
    """How one evaluation ran, filled in as it goes: an EvaluationError out of `Evaluator.evaluate` carries the
    diagnostics of the attempt it ended."""

    # Parts of the device's memory its last attempt held (services.device_lock.MEMORY_UNITS; 0 where the device is
    # not shared), and the attempts it started again with more: its problem's estimate passed its share, or the
    # device ran out of memory beside others.
    memory_units: int = 0
    memory_retries: int = 0
    # The units it kept while a new reference was timed in further processes (0: it timed none on a shared device).
    memory_units_kept: int = 0
    reference_kept: bool = False  # its reference child had served an earlier evaluation (services.parent.references)
    precompile: PrecompileOutcome | None = None  # what the compiler child did, where it ran
    # Requests to the children by "<child>.<command>": {"n": requests, "s": seconds} (services.parent.link.Link)
    requests: dict[str, dict[str, float]] = field(default_factory=dict)
    # Sides timed over placements: when each placement's calls ran and its median (services.parent.timing)
    placement_windows: list[tuple[str, float, float, float]] = field(default_factory=list)
    # This process's GPU children that started or ended since the last evaluation's end, on the same clock
    # (services.sandbox.take_child_events)
    child_events: list[tuple[str, float, float]] = field(default_factory=list)


class Evaluation(NamedTuple):
    """An evaluation's result and its diagnostics (`result, diagnostics = evaluator.evaluate(...)`)."""

    result: EvalResult
    diagnostics: Diagnostics
