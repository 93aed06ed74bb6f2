"""The per-device timing slot: exclusive across processes, freed by the kernel when its holder dies, and given
up by a cancelled wait."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from services.device_lock import MEMORY_UNITS, TimingSlot
from services.errors import EvaluationCancelled

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def measuring(slot: TimingSlot, log: list[str]) -> threading.Thread:
    """Another evaluation's measurement in a thread, once it holds `slot`: 0.3 s, then "measured" in `log`."""
    holds = threading.Event()

    def measure() -> None:
        with slot():
            holds.set()
            time.sleep(0.3)
            log.append("measured")

    m = threading.Thread(target=measure)
    m.start()
    assert holds.wait(5)
    return m


def holder(path) -> subprocess.Popen:
    """Another process that takes the slot and keeps it until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_killed_holder_frees_the_slot(tmp_path):
    slot = TimingSlot(tmp_path / "gpu-x.lock")
    other = holder(slot.path)
    got = threading.Event()

    def take() -> None:
        with slot():
            got.set()

    waiter = threading.Thread(target=take)
    waiter.start()
    assert not got.wait(1.0)  # held by the other process
    other.kill()  # SIGKILL: the kernel releases its lock
    other.wait()
    assert got.wait(5.0)
    waiter.join()
    assert slot.waited_s >= 1.0


def test_two_holders_never_overlap(tmp_path):
    slots = [TimingSlot(tmp_path / "gpu-x.lock") for _ in range(2)]  # two lock users, as two processes have
    inside: list[int] = []
    overlaps: list[int] = []

    def use(slot: TimingSlot) -> None:
        for _ in range(20):
            with slot():
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.002)
                inside.pop()

    threads = [threading.Thread(target=use, args=(s,)) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps


def test_a_cancelled_wait_gives_up_and_a_reset_slot_works_again(tmp_path):
    slot = TimingSlot(tmp_path / "gpu-x.lock")
    other = holder(slot.path)
    try:
        threading.Timer(0.3, slot.cancel).start()
        t0 = time.monotonic()
        with pytest.raises(EvaluationCancelled), slot():
            pass
        assert time.monotonic() - t0 < 2.0
    finally:
        other.kill()
        other.wait()
    slot.reset()
    with slot():
        pass
    assert slot.held_s >= 0.0 and slot.waited_s < 1.0


def test_gpu_work_never_overlaps_a_measurement_and_a_waiting_measurement_goes_first(tmp_path):
    """And each side records what the device waited for: the measurement its time waiting for request 1 to end
    (the device idle meanwhile), the request holder its longest request, by name."""
    measurer, worker = TimingSlot(tmp_path / "gpu-x.lock"), TimingSlot(tmp_path / "gpu-x.lock")  # two processes'
    log: list[str] = []
    in_flight = threading.Event()
    finish = threading.Event()

    def long_request() -> None:  # GPU work in flight when the measurement asks for the device
        with worker.shared("compiling and running forward()"):
            in_flight.set()
            finish.wait(5)
            log.append("request 1 ends")

    def measure() -> None:
        with measurer():
            log.append("measuring")
            time.sleep(0.3)
            log.append("measured")

    first = threading.Thread(target=long_request)
    first.start()
    assert in_flight.wait(5)
    m = threading.Thread(target=measure)
    m.start()
    time.sleep(0.2)
    late = TimingSlot(tmp_path / "gpu-x.lock")

    def late_request() -> None:  # arrives while the measurement waits: it must not jump the queue
        with late.shared():
            log.append("request 2")

    second = threading.Thread(target=late_request)
    second.start()
    time.sleep(0.2)
    assert log == []  # the measurement waits for request 1, request 2 waits for the measurement
    finish.set()
    for t in (first, m, second):
        t.join(5)
    assert log == ["request 1 ends", "measuring", "measured", "request 2"]
    assert late.shared_waited_s >= 0.3 and measurer.waited_s >= 0.2
    assert 0.2 <= measurer.drained_s <= measurer.waited_s
    assert worker.longest_shared[0] >= 0.4 and worker.longest_shared[1] == "compiling and running forward()"


def test_gpu_work_inside_the_own_measurement_does_not_wait_for_it(tmp_path):
    slot = TimingSlot(tmp_path / "gpu-x.lock")
    with slot(), slot.shared():  # the measuring evaluation's own requests
        pass
    with slot.shared(), TimingSlot(tmp_path / "gpu-x.lock").shared():  # two evaluations' requests side by side
        pass
    assert slot.shared_waited_s < 0.5


def test_the_slot_records_when_its_evaluation_held_the_device_and_forgets_it_on_reset(tmp_path):
    slot = TimingSlot(tmp_path / "gpu-x.lock")
    with slot.shared("loading the reference"):
        time.sleep(0.01)
    with slot(), slot.shared("inside"):  # a request within the measurement is the measurement's time
        time.sleep(0.01)
    with slot.shared():
        pass
    assert [what for _, _, what in slot.busy] == ["loading the reference", "measurement", "request"]
    assert all(a <= b for a, b, _ in slot.busy) and slot.busy[0][1] <= slot.busy[1][0] <= slot.busy[2][0]
    assert slot.busy[0][1] - slot.busy[0][0] >= 0.01 and slot.busy[1][1] - slot.busy[1][0] >= 0.01
    slot.reset()
    assert slot.busy == []


def test_a_cancelled_wait_for_the_device_gives_up(tmp_path):
    slot, other = TimingSlot(tmp_path / "gpu-x.lock"), TimingSlot(tmp_path / "gpu-x.lock")
    with other():
        threading.Timer(0.3, slot.cancel).start()
        with pytest.raises(EvaluationCancelled), slot.shared():
            pass


def test_measurements_that_queue_up_run_back_to_back_and_wait_for_requests_once(tmp_path):
    """Two measurements asked for while a request runs: both go before a request that arrives meanwhile, and
    only the first waits for the device to drain."""
    worker = TimingSlot(tmp_path / "gpu-x.lock")
    first, second = TimingSlot(tmp_path / "gpu-x.lock"), TimingSlot(tmp_path / "gpu-x.lock")
    log: list[str] = []
    in_flight, finish = threading.Event(), threading.Event()

    def request(slot: TimingSlot, name: str, hold: threading.Event | None = None) -> None:
        with slot.shared():
            in_flight.set()
            if hold is not None:
                hold.wait(5)
            log.append(name)

    def measure(slot: TimingSlot, name: str) -> None:
        with slot():
            log.append(name)
            time.sleep(0.1)

    threads = [threading.Thread(target=request, args=(worker, "request 1", finish))]
    threads[0].start()
    assert in_flight.wait(5)
    for args in ((first, "measurement 1"), (second, "measurement 2")):
        threads.append(threading.Thread(target=measure, args=args))
        threads[-1].start()
        time.sleep(0.1)
    threads.append(threading.Thread(target=request, args=(TimingSlot(tmp_path / "gpu-x.lock"), "request 2")))
    threads[-1].start()
    time.sleep(0.1)
    finish.set()
    for t in threads:
        t.join(5)
    assert log == ["request 1", "measurement 1", "measurement 2", "request 2"]
    assert first.drained_s >= 0.2 and second.drained_s < 0.05 <= second.waited_s


def test_a_gathering_measurement_lets_requests_run_on_and_starts_at_once_on_an_idle_device(tmp_path):
    """With `gather_s`, a measurement asked for while requests run lets new requests in until its time is up;
    one asked for on an idle device, or after another measurement has stopped the requests, does not wait."""
    idle = TimingSlot(tmp_path / "gpu-x.lock", gather_s=5.0)
    t0 = time.monotonic()
    with idle():
        pass
    assert time.monotonic() - t0 < 0.5

    worker, late = TimingSlot(tmp_path / "gpu-x.lock"), TimingSlot(tmp_path / "gpu-x.lock")
    first = TimingSlot(tmp_path / "gpu-x.lock", gather_s=0.6)
    second = TimingSlot(tmp_path / "gpu-x.lock", gather_s=5.0)
    log: list[str] = []
    in_flight, finish = threading.Event(), threading.Event()

    def long_request() -> None:
        with worker.shared():
            in_flight.set()
            finish.wait(5)

    def measure(slot: TimingSlot, name: str) -> None:
        with slot():
            log.append(name)
            time.sleep(0.2)

    threads = [threading.Thread(target=long_request)]
    threads[0].start()
    assert in_flight.wait(5)
    threads.append(threading.Thread(target=measure, args=(first, "measurement 1")))
    threads[-1].start()
    time.sleep(0.2)
    with late.shared():  # admitted while the measurement gathers
        log.append("request admitted")
    time.sleep(0.6)  # the gathering is over: the measurement has stopped requests and waits for the long one
    threads.append(threading.Thread(target=measure, args=(second, "measurement 2")))
    threads[-1].start()
    time.sleep(0.2)
    finish.set()
    for t in threads:
        t.join(10)
    assert log == ["request admitted", "measurement 1", "measurement 2"]
    assert second.waited_s < 1.0  # joined the first one's run instead of gathering for 5 s


def test_a_measurement_cancelled_while_it_gathers_gives_up(tmp_path):
    worker, slot = TimingSlot(tmp_path / "gpu-x.lock"), TimingSlot(tmp_path / "gpu-x.lock", gather_s=30.0)
    with worker.shared():  # a request in flight: the measurement gathers
        threading.Timer(0.3, slot.cancel).start()
        t0 = time.monotonic()
        with pytest.raises(EvaluationCancelled), slot():
            pass
        assert time.monotonic() - t0 < 2.0


def test_an_evaluation_that_needs_more_memory_waits_for_it_and_new_ones_wait_behind_it(tmp_path):
    # Three processes' evaluations: one holding half the device's memory, one that needs the whole device, and one
    # that arrives while that one waits: it must not starve it, though a unit is free for it.
    first, lone, late = (TimingSlot(tmp_path / "gpu-x.lock") for _ in range(3))
    log: list[str] = []
    entered, leave = threading.Event(), threading.Event()

    def in_flight() -> None:
        with first.occupy(MEMORY_UNITS // 2):
            entered.set()
            leave.wait(5)
            log.append("in flight ends")

    def alone() -> None:
        with lone.occupy(MEMORY_UNITS):
            log.append("alone")
            time.sleep(0.2)
            log.append("alone ends")

    def arrives_later() -> None:
        with late.occupy(1):
            log.append("late")

    threads = [
        threading.Thread(target=in_flight),
        threading.Thread(target=alone),
        threading.Thread(target=arrives_later),
    ]
    threads[0].start()
    assert entered.wait(5)
    threads[1].start()
    time.sleep(0.2)
    threads[2].start()
    time.sleep(0.2)
    assert log == []
    leave.set()
    for t in threads:
        t.join(5)
    assert log == ["in flight ends", "alone", "alone ends", "late"]
    assert lone.memory_waited_s >= 0.3


def test_evaluations_whose_units_fit_together_share_the_device(tmp_path):
    a, b, c = (TimingSlot(tmp_path / "gpu-x.lock") for _ in range(3))
    with a.occupy(MEMORY_UNITS // 2), b.occupy(MEMORY_UNITS // 2):  # both in at once
        threading.Timer(0.3, c.cancel).start()
        with pytest.raises(EvaluationCancelled), c.occupy(1):  # no unit left for a third
            pass
    c.reset()
    with c.occupy(MEMORY_UNITS):  # every unit free again
        assert c.memory_waited_s < 0.5


def test_a_cancelled_wait_for_the_device_to_itself_gives_up(tmp_path):
    slot, other = TimingSlot(tmp_path / "gpu-x.lock"), TimingSlot(tmp_path / "gpu-x.lock")
    with other.occupy(1):
        threading.Timer(0.3, slot.cancel).start()
        with pytest.raises(EvaluationCancelled), slot.occupy(MEMORY_UNITS):
            pass
    slot.reset()
    with slot.occupy(MEMORY_UNITS):  # nothing left held
        pass


def test_units_given_back_early_let_another_evaluation_in_while_the_rest_stay_held(tmp_path):
    a, b = TimingSlot(tmp_path / "gpu-x.lock"), TimingSlot(tmp_path / "gpu-x.lock")
    with a.occupy(MEMORY_UNITS) as held:
        held.keep(3)  # what the rest of the evaluation needs
        assert len(held) == 3
        with b.occupy(MEMORY_UNITS - 3):  # the units given back, at once
            assert b.memory_waited_s < 0.5
        threading.Timer(0.3, b.cancel).start()
        with pytest.raises(EvaluationCancelled), b.occupy(MEMORY_UNITS - 2):  # one more than were given back
            pass


def test_the_parents_comparisons_wait_for_another_evaluations_measurement(tmp_path):
    # At KernelBench's published sizes a comparison reads gigabytes: beside another evaluation's timed calls on the
    # same GPU it would take their memory bandwidth. The parent's comparisons and digests are GPU work like its
    # requests.
    import torch

    from services.parent.link import Link
    from services.parent.record import Record
    from services.schema import EvalOptions
    from services.settings import EvalSettings

    settings = EvalSettings()
    parent = TimingSlot(tmp_path / "gpu-x.lock")
    link = Link(settings, EvalOptions(), "cpu", Record(settings.defences), lambda role: None, parent)
    x = [torch.arange(6.0)]
    log: list[str] = []
    m = measuring(TimingSlot(tmp_path / "gpu-x.lock"), log)
    assert link.compare(x, [x[0].clone()]).ok and log == ["measured"]
    assert link.inputs_equal(x, x) and link.alike(x, [x, x]) and link.digest(x) == link.digest([x[0].clone()])
    m.join(5)
    assert link.gpu_waited_s >= 0.2 and parent.longest_shared[1].startswith(("comparing", "digesting"))


def test_a_turn_held_for_receiving_and_comparing_is_not_given_up_to_a_waiting_measurement(tmp_path):
    # Between a receive's turn and a comparison's, a waiting measurement would go first and the evaluation would
    # wait all of it: the stage holds one turn for both, and the comparison inside it does not ask again.
    import torch

    from services.parent.link import Link
    from services.parent.record import Record
    from services.schema import EvalOptions
    from services.settings import EvalSettings

    settings = EvalSettings()
    measurer = TimingSlot(tmp_path / "gpu-x.lock")
    link = Link(settings, EvalOptions(), "cpu", Record(settings.defences), lambda role: None)
    link.slot = TimingSlot(tmp_path / "gpu-x.lock")
    x = [torch.arange(6.0)]
    log: list[str] = []

    def measure() -> None:
        with measurer():
            log.append("measured")

    with link.gpu_turn("receiving and comparing"):
        m = threading.Thread(target=measure)
        m.start()
        time.sleep(0.3)  # the measurement now waits for this turn
        assert link.compare(x, [x[0].clone()]).ok and link.digest(x) == link.digest(x)
        log.append("compared")
    m.join(5)
    assert log == ["compared", "measured"] and link.gpu_waited_s < 0.2


def test_the_parent_gives_its_buffers_back_in_a_turn_unless_it_holds_nothing_or_is_cancelled(tmp_path, monkeypatch):
    # Memory given back is unmapped, and beside that a memory-bound call measured on an H200 took 12% longer: the
    # parent's receive buffers go back in a turn of the slot. With nothing held there is nothing to unmap, and an
    # evaluation refused early does not wait for another's measurement.
    import torch

    from services.parent.link import Link
    from services.parent.record import Record
    from services.schema import EvalOptions
    from services.settings import EvalSettings

    settings = EvalSettings()
    given: list[str] = []
    link = Link(
        settings,
        EvalOptions(),
        "cpu",
        Record(settings.defences),
        lambda role: None,
        TimingSlot(tmp_path / "gpu-x.lock"),
        give_back=lambda: given.append("given back"),
    )
    m = measuring(TimingSlot(tmp_path / "gpu-x.lock"), given)
    link.give_back_buffers()  # no device memory reserved in this process
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda: 1 << 30)
    link.give_back_buffers()
    m.join(5)
    assert given == ["given back", "measured", "given back"] and link.gpu_waited_s >= 0.2, given
    # Cancelled while it waits for the turn: the buffers go back at once all the same.
    m = measuring(TimingSlot(tmp_path / "gpu-x.lock"), given)
    link.slot.cancel()
    with pytest.raises(EvaluationCancelled):
        link.give_back_buffers()
    m.join(5)
    assert given[3:] == ["given back", "measured"], given


def test_the_holders_of_flock_locks_are_read_from_proc_locks(tmp_path):
    import fcntl
    import os

    from services import procfs
    from services.device_lock import lock_files

    slot = TimingSlot(tmp_path / "gpu.lock")
    with slot.shared():  # `.want` taken and given back, `.use` held shared
        held = procfs.flock_holders().get(os.getpid(), set())
        assert procfs.file_id(str(slot.use)) in held and procfs.file_id(str(slot.want)) not in held
    assert procfs.file_id(str(slot.use)) not in procfs.flock_holders().get(os.getpid(), set())
    fd = os.open(slot.want, os.O_RDONLY)  # read-only, as a child could
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        assert procfs.file_id(str(slot.want)) in procfs.flock_holders()[os.getpid()] & lock_files(str(slot.path))
    finally:
        os.close(fd)


def test_a_candidate_that_holds_a_lock_of_the_slot_is_killed_and_the_device_serves_on(tmp_path, relu):
    # Read-only is enough to take a `flock`: held by the candidate, the slot's `.want` would keep every request on
    # the device from starting, its own evaluation's included, whose waits count against no limit.
    from helpers import relu_candidate, unique

    from services.evaluator import Evaluator
    from services.schema import EvalOptions, Verdict
    from services.settings import EvalSettings

    lock = tmp_path / "cpu.lock"
    body = f"""
global HELD
if HELD is None:
    fc, o = __import__("fc" + "ntl"), __import__("o" + "s")
    HELD = o.open({str(lock.with_suffix(".want"))!r}, o.O_RDONLY)
    fc.flock(HELD, fc.LOCK_SH)
return triton_relu(x)
"""
    with Evaluator(EvalSettings(correctness_trials=2, warm_children=1, device_lock=str(lock))) as ev:
        began = time.monotonic()
        result = ev.evaluate(relu, unique(relu_candidate(body, "HELD = None\n")), EvalOptions(device="cpu")).result
        assert result.verdict is Verdict.CRASHED and "lock of the device's timing slot" in result.feedback
        assert time.monotonic() - began < 60
        with TimingSlot(lock).shared("a neighbour's request"):  # nothing holds the device any more
            pass


def test_a_childs_start_waits_for_a_gap_between_measurements_without_taking_a_lock(tmp_path):
    from services.device_lock import wait_between_measurements

    slot = TimingSlot(tmp_path / "gpu.lock")
    assert wait_between_measurements(str(slot.want), 5.0) == 0.0  # nothing has measured yet: no file
    log: list[str] = []
    m = measuring(slot, log)  # holds `.want` (shared) for 0.3 s
    waited = wait_between_measurements(str(slot.want), 5.0)
    m.join()
    assert log == ["measured"] and 0.1 < waited < 2.0
    m = measuring(slot, log)
    assert wait_between_measurements(str(slot.want), 0.05) < 0.2  # at most its limit, however long the measurement
    m.join()


def test_a_childs_wait_for_a_gap_ends_when_its_evaluation_needs_it(tmp_path):
    """The evaluation that takes a starting child may itself hold `.want`: no gap would come before the cap."""
    from services.device_lock import wait_between_measurements

    slot = TimingSlot(tmp_path / "gpu.lock")
    needed = tmp_path / "needed"
    with slot():  # the child's own evaluation, measuring
        threading.Timer(0.2, needed.touch).start()
        waited = wait_between_measurements(str(slot.want), 5.0, str(needed))
    assert 0.15 < waited < 1.0


def test_a_childs_start_beside_measurements_is_its_span_less_the_gaps_it_waited_for():
    from services.sandbox import _working

    waits = [[2.0, 3.0], [5.0, 5.5]]  # before its context, before its device warm-up
    assert _working(1.0, 8.0, {"waits": waits}) == [(1.0, 2.0), (3.0, 5.0), (5.5, 8.0)]
    assert _working(1.0, 8.0, {"waits": [[1.0, 8.0]]}) == []  # it did nothing but wait
    assert _working(1.0, 8.0, {}) == [(1.0, 8.0)]  # a child that waits for nothing (a CPU child's, a start alone)
    assert _working(1.0, 8.0, {"waits": [["x"]]}) == [(1.0, 8.0)]  # malformed: the whole start counts
