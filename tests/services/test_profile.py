"""The profile stage's start (services.parent.profile): the profiler's first session in a process is driver work, and
it runs none of the candidate's code, so it is the one request that waits for no other evaluation's measurement."""

from __future__ import annotations

import threading
import time

from helpers import bundled_source, unique

from services.device_lock import TimingSlot
from services.parent.link import Link
from services.parent.load import start_job
from services.parent.record import Record
from services.protocol.messages import Load, Loaded, ProfilerStarted, Release, Released, StartProfiler
from services.sandbox import Child
from services.schema import EvalOptions
from services.settings import EvalSettings


def test_the_profilers_start_waits_for_no_measurement_and_other_requests_do(tmp_path, relu):
    settings = EvalSettings(warm_children=0)
    slot = TimingSlot(tmp_path / "gpu-x.lock")
    link = Link(settings, EvalOptions(), "cpu", Record(settings.defences), lambda role: None, slot=slot)
    link.cand = Child("cpu", settings)
    holds, measured = threading.Event(), threading.Event()

    def measure() -> None:  # another evaluation's measurement on the device, until `measured`
        with TimingSlot(slot.path)():
            holds.set()
            measured.wait(30)

    measuring = threading.Thread(target=measure)
    try:
        deadline = time.monotonic() + 60
        child = start_job(link, link.cand, "candidate", relu.source, unique(bundled_source("level1/1_ReLU")), deadline)
        link.ask(child, Load(), Loaded, deadline, "loading the candidate")
        measuring.start()
        assert holds.wait(10)
        began, waited = time.monotonic(), link.gpu_waited_s
        link.ask(child, StartProfiler(), ProfilerStarted, deadline, "starting the profiler", turn=False)
        assert time.monotonic() - began < 10 and link.gpu_waited_s == waited
        assert link.requests["candidate.start_profiler"]["n"] == 1

        released = threading.Event()
        asking = threading.Thread(
            target=lambda: (link.ask(child, Release(), Released, deadline, "releasing tensors"), released.set())
        )
        asking.start()
        assert not released.wait(1.0)  # a request in a turn waits for the measurement
        measured.set()
        asking.join(30)
        assert released.is_set() and link.gpu_waited_s - waited >= 1.0
    finally:
        measured.set()
        link.close()
