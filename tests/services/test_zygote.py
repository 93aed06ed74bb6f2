"""Children forked from the zygote (services.zygote): the same isolation as a child started as a command, their
exit statuses reported, and a zygote that dies replaced without losing track of the children it forked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from services import procfs, zygote
from services.errors import ChildDied
from services.sandbox import Child
from services.settings import EvalSettings
from services.zygote import ForkedProcess


@pytest.fixture
def child():
    made: list[Child] = []

    def make() -> Child:
        c = Child("cpu", EvalSettings())
        made.append(c)
        c.wait_ready(time.monotonic() + 120)
        return c

    yield make
    for c in made:
        c.close()


def test_a_forked_child_leads_its_own_session_in_its_own_directory_and_holds_no_socket(child):
    c = child()
    pid = c.proc.pid
    assert isinstance(c.proc, ForkedProcess)
    assert os.getsid(pid) == pid  # its session is what `kill` ends
    assert os.readlink(f"/proc/{pid}/cwd") == os.path.realpath(c.tmpdir)
    # The zygote's end of its socket to this process, or anything else of the zygote's, would be a way out.
    targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    assert not [t for t in targets if t.startswith("socket:")], targets
    assert c.network != "unknown"  # isolated as a started child is, after the fork


def test_a_forked_childs_exit_status_reaches_its_parent(child):
    c = child()
    os.kill(c.proc.pid, signal.SIGSEGV)
    assert c.proc.wait(timeout=30) == -signal.SIGSEGV
    with pytest.raises(ChildDied, match="killed by SIGSEGV"):
        c.start_job({"nonce": "n"}, time.monotonic() + 5)


def test_children_outlive_a_dead_zygote_which_the_next_spawn_replaces(child):
    first = child()
    dead = zygote._ZYGOTES["interpreter"]._proc
    assert dead is not None
    dead.kill()
    dead.wait(timeout=30)
    second = child()  # forked by a new zygote
    assert zygote._ZYGOTES["interpreter"]._proc is not dead
    assert first.proc.poll() is None and second.proc.poll() is None
    first.kill()
    # Its status went with the old zygote: once gone it counts as killed, as the sandbox's close would have it.
    assert first.proc.wait(timeout=30) == -signal.SIGKILL


def _signal_state(pid: int) -> list[str]:
    with open(f"/proc/{pid}/status") as f:
        return [line for line in f if line.startswith(("SigBlk", "SigIgn", "SigCgt"))]


def test_a_forked_child_has_the_signal_dispositions_of_a_child_started_as_a_command():
    # The zygote catches SIGCHLD for itself; its children must not inherit that (nor lose SIGPIPE's being ignored,
    # which turns a write to a closed channel into BrokenPipeError rather than a silent death).
    children = [Child("cpu", EvalSettings(fork_children=fork)) for fork in (True, False)]
    try:
        for c in children:
            c.wait_ready(time.monotonic() + 120)
        forked, started = (_signal_state(c.proc.pid) for c in children)
        assert isinstance(children[0].proc, ForkedProcess)
        assert forked == started
    finally:
        for c in children:
            c.close()


def test_asking_for_an_exit_status_while_a_spawn_holds_the_zygote_answers_not_yet_and_a_bounded_wait_ends(child):
    # A spawn holds the zygote's lock while it waits for a fork or a new zygote (up to 120 s on a loaded host); an
    # evaluation whose child died must not sit that out (a CI run once stalled past 120 s after a child's exit).
    c = child()
    z = zygote._ZYGOTES["interpreter"]
    with z._lock:
        t0 = time.monotonic()
        assert c.proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            c.proc.wait(timeout=1.0)
        assert time.monotonic() - t0 < 3.0
    c.kill()
    assert c.proc.wait(timeout=30) == -signal.SIGKILL


def test_children_outlive_a_zygote_their_parent_dropped(child):
    c = child()
    client = zygote._ZYGOTES["interpreter"]
    with client._lock:
        client._lost()  # as when the parent gives up on a zygote that does not answer: the parent still ends them
    time.sleep(1)
    assert not procfs.dying(c.proc.pid)


def test_the_children_of_a_process_that_died_die_with_it():
    # The evaluating process killed (a worker's pool process, say) while its child spins in user code, where it
    # never reads its channel's end: nothing else would ever end it.
    script = (
        "import threading, time\n"
        "from services.protocol.messages import Job, Load, command_header\n"
        "from services.sandbox import Child\n"
        "from services.settings import EvalSettings\n"
        "c = Child('cpu', EvalSettings())\n"
        "job = Job(nonce='n' * 32, role='reference', device='cpu', reference_source='while True:\\n    pass\\n',\n"
        "          candidate_source=None, init_seed=1, l2_flush_factor=0.0, defences=True)\n"
        "c.start_job(command_header(job), time.monotonic() + 120)\n"
        "load = (command_header(Load()), time.monotonic() + 600)\n"
        "threading.Thread(target=c.request, args=load, daemon=True).start()\n"
        "print(c.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        time.sleep(1)  # into the loop
        assert not procfs.dying(pid)
    finally:
        parent.kill()
        parent.wait(timeout=30)
    deadline = time.monotonic() + 30
    while not procfs.dying(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert procfs.dying(pid)
