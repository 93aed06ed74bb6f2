"""Whose fault a child's failure to start is (services.parent.load.start_failure): nothing of the request has run
in a starting child, so a child that died before its job is replaced once, and a second failure is the machine's,
except a CUDA context that found no device memory while other evaluations shared the device, which the evaluator
settles by running again alone."""

from __future__ import annotations

import os
import signal
import time

from services.errors import ChildDied, ChildTimedOut, DeviceMemoryShort, InfrastructureFault
from services.parent.link import Link
from services.parent.load import start_failure, start_job
from services.parent.record import Record
from services.protocol.messages import START_NO_DEVICE_MEMORY, Load, Loaded
from services.sandbox import Child
from services.schema import EvalOptions
from services.settings import EvalSettings

REFERENCE = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1
def get_inputs():
    return [torch.randn(4)]
def get_init_inputs():
    return []
"""

NO_MEMORY = ChildDied(f"exited with status {START_NO_DEVICE_MEMORY} without sending a result", status=75)


def test_no_device_memory_for_a_context_beside_other_evaluations_is_a_shortage_that_does_not_mark_the_problem():
    fault = start_failure("reference", NO_MEMORY, "no device memory for a CUDA context", memory_shared=True)
    assert isinstance(fault, DeviceMemoryShort)
    assert not fault.problem_sized  # others' memory, not the problem's sizes: its next candidates start as usual


def test_no_device_memory_with_the_device_to_itself_is_the_machines_fault():
    fault = start_failure("candidate", NO_MEMORY, "tail", memory_shared=False)
    assert isinstance(fault, InfrastructureFault)
    assert "a candidate child failed to start" in str(fault) and "tail" in str(fault)


def test_other_deaths_and_hangs_at_start_are_the_machines_fault_however_the_device_is_shared():
    for exc in (
        ChildDied("exited with status 1 without sending a result", status=1),
        ChildDied("killed by SIGKILL", "SIGKILL"),
        ChildTimedOut(),
    ):
        assert isinstance(start_failure("reference", exc, "", memory_shared=True), InfrastructureFault)


def test_a_child_that_died_before_its_job_is_replaced_by_a_fresh_one_that_runs_it():
    # A starting CUDA child whose context found the device full exits 75 while it waits in the pool; the
    # evaluation that took it got `failed` (an H100 beside 3 busy GPUs). Nothing of any request ran in it.
    settings = EvalSettings(warm_children=0)
    link = Link(settings, EvalOptions(), "cpu", Record(settings.defences), lambda role: None)
    dead = Child("cpu", settings)
    os.kill(dead.proc.pid, signal.SIGKILL)
    link.ref = dead
    try:
        child = start_job(link, dead, "reference", REFERENCE, None, time.monotonic() + 60)
        assert child is not dead and link.ref is child
        link.ask(child, Load(), Loaded, time.monotonic() + 60, "loading the reference")
    finally:
        link.close()
