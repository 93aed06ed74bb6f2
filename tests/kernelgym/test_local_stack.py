"""The local stack (kernelgym.stack) as a process that runs it sees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelgym.stack import LocalStack, stop

PROJECT = str(Path(__file__).resolve().parents[2])


def test_a_stack_stopped_by_sigterm_leaves_no_process_or_directory_behind():
    """`timeout` and `kill` send SIGTERM; the stack's processes run in sessions of their own, so unless the stack
    unwinds, its Redis (and gateway and workers) would outlive it, holding their ports and GPUs."""
    code = """
        import time
        from kernelgym.stack import LocalStack

        with LocalStack() as stack:
            stack.start_redis()
            print(stack.redis_proc.pid, stack.dir, flush=True)
            time.sleep(120)
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": PROJECT},
    )
    try:
        pid, workdir = proc.stdout.readline().split()
        assert Path(f"/proc/{pid}").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()
    assert not Path(workdir).exists()


def test_a_stack_whose_workers_all_exit_says_what_they_said():
    # The stack's directory goes with it, so the error itself carries the end of each worker's log.
    with LocalStack(env={"KERNELGYM_WORKER_CONCURRENCY": "many"}) as stack:
        stack.start_redis()
        stack.start_worker()
        said = r"(?s)every worker exited.*worker0.log:.*KERNELGYM_WORKER_CONCURRENCY: Input should"
        with pytest.raises(RuntimeError, match=said):
            stack.wait_ready(timeout=60)


def test_processes_are_stopped_together_within_one_grace():
    # One after another, two processes that ignore SIGTERM would take two graces; whoever stops a stack may kill it
    # before that, leaving the rest running.
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"
    ignoring = [sys.executable, "-c", code]
    procs = [subprocess.Popen(ignoring, start_new_session=True, stdout=subprocess.PIPE) for _ in range(2)]
    for proc in procs:
        proc.stdout.readline()  # its handler is set
    began = time.monotonic()
    stop(*procs, None, grace=1.0)
    assert time.monotonic() - began < 1.8
    assert [proc.returncode for proc in procs] == [-signal.SIGKILL] * 2
    for proc in procs:
        proc.stdout.close()
