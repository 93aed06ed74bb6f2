"""Whose fault a child's failure to start is (services.parent.load.start_failure): nothing of the request has run
in a starting child, so it is the machine's, except a CUDA context that found no device memory while other
evaluations shared the device, which the evaluator settles by running again alone."""

from __future__ import annotations

from services.errors import ChildDied, ChildTimedOut, DeviceMemoryShort, InfrastructureFault
from services.parent.load import start_failure
from services.protocol.messages import START_NO_DEVICE_MEMORY

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
