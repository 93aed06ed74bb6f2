"""A request's reference is user code: it runs under the candidate's sandbox, nothing it starts outlives its
evaluation or reaches another evaluation's processes, and its faults are the request's, never the machine's."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from helpers import bundled_source, small_relu_reference

from services.errors import ReferenceFailed
from services.evaluator import Evaluator
from services.problems import Problem
from services.sandbox import Child
from services.schema import EvalOptions, Verdict
from services.settings import EvalSettings

RELU = "level1/1_ReLU"
NO_TIMING = EvalOptions(device="cpu", timing=False)
ATTACKER = b"kg-attacker"

RELU_REFERENCE = small_relu_reference()

# The attack of issue 39, in native calls that the audit hook does not see: at import the reference forks, the
# fork calls setsid and forks again, and the grandchild, named for the test to find, kills every other child of
# the zygote that started the bystander (the pool's later evaluation children) for 20 s.
FORKING_REFERENCE = (
    RELU_REFERENCE
    + """
import ctypes, os, time

_libc = ctypes.CDLL(None)
if _libc.fork() == 0:
    _libc.setsid()
    if _libc.fork() != 0:
        _libc._exit(0)
    _libc.prctl(15, ctypes.c_char_p(b"kg-attacker"), 0, 0, 0)
    mine = os.getcwd()
    until = time.monotonic() + 20
    while time.monotonic() < until:
        for entry in os.listdir("/proc"):
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
                theirs = os.readlink(f"/proc/{entry}/cwd")
            except (OSError, ValueError):
                continue
            if fields[1] == "%(zygote)d" and theirs != mine:
                _libc.kill(int(entry), 9)
        time.sleep(0.05)
    _libc._exit(0)
time.sleep(1.5)
"""
)


def _attackers() -> list[int]:
    """Live processes the forking reference started."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/comm", "rb") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == ATTACKER and stat[stat.rfind(b")") + 2 :].split()[0] != b"Z":
            found.append(int(entry))
    return found


def test_a_reference_is_under_the_audit_hook_before_it_is_imported(evaluator):
    reference = Problem(id="forks", source=RELU_REFERENCE + "\n__import__('os').fork()\n")
    with pytest.raises(ReferenceFailed, match=r"sandbox: spawning a process \(os.fork\)"):
        evaluator.evaluate(reference, bundled_source(RELU), NO_TIMING)


def test_a_reference_that_breaks_the_sandbox_in_the_candidates_process_is_not_the_candidates_fault(evaluator):
    """get_inputs() runs in the candidate's process too: what it tries there ends the request, not the candidate."""
    source = RELU_REFERENCE.replace(
        "def get_inputs():\n",
        "def get_inputs():\n    if 'kg_candidate' in __import__('sys').modules:\n        open('/etc/kg', 'w')\n",
    )
    with pytest.raises(ReferenceFailed, match="outside the private directory"):
        evaluator.evaluate(Problem(id="writes", source=source), bundled_source(RELU), NO_TIMING)


def forking_attack_harms_nothing(evaluator: Evaluator, relu: Problem, options: EvalOptions) -> None:
    """Issue 39's attack on `options.device`: the attacker's request fails, the bystander (a child started
    beside it, as the pool's later children are) and the later evaluations are untouched, nothing outlives it."""
    settings = EvalSettings()
    bystander = Child(options.device or "cpu", settings)
    try:
        bystander.wait_ready(time.monotonic() + settings.child_start_timeout_s)
        zygote = int(Path(f"/proc/{bystander.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        attack = Problem(id="setsid-attacker", source=FORKING_REFERENCE % {"zygote": zygote})
        with pytest.raises(ReferenceFailed, match="left 1 process"):
            evaluator.evaluate(attack, bundled_source(RELU), options)
        assert not _attackers()  # nothing the evaluation started outlives it
        assert bystander.proc.poll() is None and bystander.idle()
        for _ in range(2):  # the pool's later children, started beside the attacker, evaluate as before
            assert evaluator.evaluate(relu, bundled_source(RELU), options).result.verdict is Verdict.PASSED
    finally:
        bystander.close()
        for pid in _attackers():  # only where the test failed: the attack must not outlive it either
            os.kill(pid, signal.SIGKILL)


def test_the_forking_reference_of_issue_39_harms_no_other_evaluation(evaluator, relu):
    forking_attack_harms_nothing(evaluator, relu, NO_TIMING)
