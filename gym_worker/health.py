"""Telling a sick GPU from a bad request, and taking a GPU out of service only when it is sick.

Only `InfrastructureFault`, which the core raises where the trusted parent itself saw the machine fail, counts
as a suspicion; nothing a candidate or a request's reference prints or raises does. Suspicions alone never
quarantine: a probe that evaluates a known-good kernel against a known reference, both bundled and trusted,
must fail too, and the same probe lifts the quarantine once it passes again.

A quarantine belongs to the device, not to the process that saw it: it is a marker file next to the device's
timing-slot lock, so every pool process (and any other worker) on that GPU reports it and any of them may lift it,
even after the process that set it is gone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from services import EvalOptions, EvaluationError, Evaluator, Verdict, bundled_kernel, bundled_problems

log = logging.getLogger("kernelgym.worker")

PROBE_PROBLEM = "level1/1_ReLU"


def probe(evaluator: Evaluator, device: str) -> str | None:
    """None when the bundled ReLU kernel evaluates as `passed` on `device`, else what went wrong."""
    problem = bundled_problems().load(PROBE_PROBLEM)
    options = EvalOptions(device=device, timing=False)
    try:
        result = evaluator.evaluate(problem, bundled_kernel(PROBE_PROBLEM).read_text(), options).result
    except EvaluationError as exc:
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    if result.verdict is not Verdict.PASSED:
        return f"the known-good kernel got {result.verdict.value}: {result.feedback[:300]}"
    return None


class DeviceHealth:
    """This process's consecutive infrastructure faults, confirmed by `check` (a probe: None when healthy) before
    the device is quarantined; the quarantine itself is the `marker` file, shared by every process on the device."""

    def __init__(self, threshold: int, check: Callable[[], str | None], marker: Path):
        self.threshold = threshold
        self.check = check
        self.marker = marker
        self.suspicions = 0
        self.last_probe: str | None = None

    @property
    def quarantined(self) -> bool:
        return self.marker.exists()

    def ok(self) -> None:
        """An evaluation ran to a verdict: whatever failed before was not the device."""
        self.suspicions = 0

    def fault(self) -> bool:
        """Count an infrastructure fault; True when it quarantined the device (the probe confirmed it)."""
        self.suspicions += 1
        if self.quarantined or self.suspicions < self.threshold:
            return False
        self.last_probe = self.check()
        if self.last_probe is None:
            log.warning("%d infrastructure faults, but the probe passed: not quarantined", self.suspicions)
            self.suspicions = 0
            return False
        log.error("GPU quarantined after %d infrastructure faults; probe: %s", self.suspicions, self.last_probe)
        self._mark(self.last_probe)
        return True

    def recheck(self, min_interval_s: float = 0.0) -> bool:
        """Probe a quarantined device again, unless another process probed it in the last `min_interval_s` or is
        probing now; True when the probe passed and this call lifted the quarantine."""
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.marker.with_suffix(".probe"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                since = time.time() - self.marker.stat().st_mtime
            except FileNotFoundError:
                return False
            if since < min_interval_s:
                return False
            self.last_probe = self.check()
            if self.last_probe is not None:
                self._mark(self.last_probe)  # also dates this probe for the other processes
                return False
            log.warning("the probe passes again: quarantine lifted")
            self.marker.unlink(missing_ok=True)
            self.suspicions = 0
            return True
        finally:
            os.close(fd)

    def _mark(self, reason: str) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.marker.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(reason + "\n")
        os.replace(tmp, self.marker)
