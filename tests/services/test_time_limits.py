"""Time limits that follow the work: a candidate call's limit is a floor plus a multiple of the reference's time
for the same call, Triton compilation (measured by hooks in the child) extends it within an allowance, and a
hang ends within seconds of its limit with feedback that names the limit."""

from __future__ import annotations

import os
import re
import threading
import time

import pytest
from helpers import relu_candidate

from services.child.runtime import CompileClock
from services.evaluator import Evaluator
from services.protocol.channel import ChannelTimeout, Deadline, recv, send
from services.protocol.messages import COMPILE_CLOCK, read_compile_clock
from services.schema import EvalOptions, Verdict
from services.settings import EvalSettings

NO_TIMING = EvalOptions(device="cpu", timing=False)


def test_a_kernel_launch_then_an_endless_loop_times_out_within_a_minute_on_cpu(relu):
    # Default limits: the CPU floor (30 s) plus 100 x the reference's call; the bound is 60 s.
    with Evaluator(EvalSettings(correctness_trials=1, warm_children=0)) as ev:
        start = time.monotonic()
        result = ev.evaluate(relu, relu_candidate("y = triton_relu(x)\nwhile True:\n    pass"), NO_TIMING).result
        elapsed = time.monotonic() - start
    assert result.verdict is Verdict.TIMEOUT
    # Starting cold children on a loaded two-core machine takes seconds that a worker's warm children do not.
    assert elapsed - result.phases["start"] < 60
    assert re.search(r"time limit of 3\d(\.\d)? s \(30 s \+ 100 x the reference's", result.feedback), result.feedback


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def test_a_deadline_moves_while_its_extension_allows(pipe):
    r, w = pipe
    start = time.monotonic()
    sender = threading.Timer(0.5, send, (w, {"late": True}))
    sender.start()
    deadline = Deadline(start + 0.2, lambda: start + 30.0)
    header, _ = recv(r, deadline)
    sender.join()
    assert header["late"] is True and deadline.at == start + 30.0


def test_a_deadline_without_extension_expires(pipe):
    r, _ = pipe
    start = time.monotonic()
    with pytest.raises(ChannelTimeout):
        recv(r, Deadline(start + 0.1, lambda: start))
    assert time.monotonic() - start < 1.0


def test_the_compile_clock_publishes_nested_intervals_once(tmp_path):
    clock = CompileClock(str(tmp_path / COMPILE_CLOCK))
    assert read_compile_clock(str(tmp_path)) == (0.0, None)
    clock.enter()
    clock.enter()  # a compilation inside an autotuner's benchmark of one config
    total, started = read_compile_clock(str(tmp_path))
    assert total == 0.0 and started is not None and started <= time.monotonic()
    time.sleep(0.05)
    clock.exit()
    assert read_compile_clock(str(tmp_path))[1] == started  # still inside the outer interval
    clock.exit()
    total, started = read_compile_clock(str(tmp_path))
    assert started is None and 0.05 <= total < 1.0


def test_an_unreadable_compile_clock_grants_nothing(tmp_path):
    (tmp_path / COMPILE_CLOCK).write_bytes(b"not json")
    assert read_compile_clock(str(tmp_path)) == (0.0, None)
