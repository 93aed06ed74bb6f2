"""How much of a shared GPU's memory an evaluation of a problem needs, in the units the device lock hands out.

Evaluations in flight share a GPU's memory (services.device_lock). At KernelBench's published sizes one evaluation
can need more than half an H100 (level1/19_ReLU: 6.4 GB of inputs and as much output, held by both children and
the parent), and two such evaluations side by side ran out of memory and each started again alone: on one H100
with two in flight, 9 of 51 evaluations of an RL step did, which took 41% of the worker's time. So each evaluation
holds a share of the device's memory, and a problem whose tensors need more waits for it before its candidate runs.

The need is estimated from the reference's first correctness call (its inputs' and output's bytes), where the
evaluation stops and starts again with the units it needs if they pass its share, before the candidate has run:
that costs the reference child's start and one call. The estimate counts what the evaluation holds at its peak;
a problem whose reference holds more than its tensors (large intermediates) runs out of memory instead, and is
remembered as needing the whole device.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import NamedTuple

import torch

from services.device_lock import MEMORY_UNITS
from services.problems import Problem

# A child's CUDA context and its allocator's slack.
CHILD_OVERHEAD_BYTES = 768 << 20
# The part of the device's memory the units divide: the rest is for the pool processes' own contexts, warm
# children and the idle reference children kept between evaluations.
SHARED_FRACTION = 0.9


class MemoryShare(NamedTuple):
    """What an evaluation holds of a shared device's memory: `units` of MEMORY_UNITS, and whether it is `alone`
    (every unit, the device cleared for it: its problem needs the whole device)."""

    units: int
    alone: bool


def footprint_bytes(inputs: int, output: int) -> int:
    """Device memory an evaluation holds at its peak, from the reference's inputs and output (bytes): during
    correctness, the reference child's inputs and output, the candidate child's inputs and two outputs (the
    determinism check keeps both) and the parent's copies of both outputs, with both children's contexts and a
    third's. A new reference's further timing processes hold less (`further_processes_bytes`): they run after the
    candidate child has closed, when the evaluation gives back what they do not need."""
    return 2 * inputs + 5 * output + 3 * CHILD_OVERHEAD_BYTES


def further_processes_bytes(inputs: int, output: int, loaded: int, together: int = 1) -> int:
    """Device memory an evaluation holds while its reference is timed in further processes, `together` of them
    loaded side by side, after its candidate child has closed: each one's inputs and output, as much again for the
    reference's intermediates, and, in each and in the evaluation's own reference child (its tensors released), a
    context and what a loaded reference holds (`loaded`: its model)."""
    return together * 2 * (inputs + output) + (together + 1) * (loaded + CHILD_OVERHEAD_BYTES)


def units(need_bytes: int, device_bytes: int) -> int:
    """The units (of MEMORY_UNITS) that hold `need_bytes` on a device of `device_bytes`, at least 1."""
    unit = device_bytes * SHARED_FRACTION / MEMORY_UNITS
    return min(MEMORY_UNITS, max(1, math.ceil(need_bytes / unit)))


def settle(device_bytes: int, most_s: float = 10.0) -> float:
    """Wait until the device's free memory reaches its shared part, or stops growing for half a second (what other
    processes keep idle: their contexts, their kept reference children): an evaluation with every unit must not meet
    the memory of the last evaluations' children, which are still dying when their units are free (at conc 4 on an
    H100, a reference alone ran out of memory with 116 MB free). Returns the seconds waited."""
    t0 = last_growth = time.monotonic()
    free = torch.cuda.mem_get_info()[0]
    while free < device_bytes * SHARED_FRACTION and time.monotonic() < min(last_growth + 0.5, t0 + most_s):
        time.sleep(0.02)
        now = torch.cuda.mem_get_info()[0]
        if now > free + (64 << 20):
            last_growth = time.monotonic()
        free = max(free, now)
    return time.monotonic() - t0


class Footprints:
    """Each problem's need in units, as files named after the reference source's hash in `directory`, beside the
    device's lock files: every process that evaluates on the device reads and adds to them, so a problem's next
    candidates start with the units it needs. The `most` latest are kept."""

    def __init__(self, directory: Path, most: int = 1024):
        self.directory = directory
        self.most = most

    def _file(self, problem: Problem) -> Path:
        return self.directory / problem.digest

    def get(self, problem: Problem) -> int | None:
        try:
            return int(self._file(problem).read_text())
        except (FileNotFoundError, ValueError):  # not yet known, or being written by another process
            return None

    def set(self, problem: Problem, need: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        file = self._file(problem)
        partial = file.with_name(f"{file.name}.{os.getpid()}.{id(self)}.tmp")
        partial.write_text(str(need))
        partial.replace(file)  # whole for any reader; the latest again where it was there already
        kept = sorted((p for p in self.directory.iterdir() if not p.name.endswith(".tmp")), key=_mtime)
        for old in kept[: max(0, len(kept) - self.most)]:
            old.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # another process pruned it meanwhile
        return 0.0
