"""What the deployment files rely on when they stop a worker (docker-compose.yml's stop_grace_period, the
worker pod's terminationGracePeriodSeconds): SIGTERM to the worker's main process alone, as tini passes it
on in the images, lets the running evaluation finish on that worker and takes no new one."""

from __future__ import annotations

import signal
import time

from conftest import WORKER_ENV
from helpers import relu_candidate, unique

from gym_client import KernelGymClient
from kernelgym.stack import LocalStack

RELU = "level1/1_ReLU"


def test_sigterm_lets_the_running_evaluation_finish_and_takes_no_new_one(tmp_path):
    with LocalStack(tmp_path / "stack", env=WORKER_ENV) as stack:
        stack.start_redis()
        stack.start_gateway()
        worker = stack.start_worker()
        stack.wait_ready()
        # Slow on its first call only: long enough to be caught running, short enough for a fast test.
        first_call_sleeps = "if not _slept:\n    _slept.append(time.sleep(3))\nreturn triton_relu(x)"
        slow = unique(relu_candidate(first_call_sleeps, extra="import time\n_slept = []\n"))
        with KernelGymClient(stack.base_url, timeout=30) as gym:
            running = gym.evaluate(slow, problem_id=RELU, wait=0)
            deadline = time.monotonic() + 120
            while gym.get(running.id).status != "running":
                assert time.monotonic() < deadline, "the evaluation never started"
                time.sleep(0.1)
            worker.send_signal(signal.SIGTERM)  # the main process only, not its process group
            later = gym.evaluate(unique(slow), problem_id=RELU, wait=0)
            finished = gym.wait(running.id, timeout=300)
            assert finished.status == "done" and finished.verdict == "passed"
            assert finished.raw["attempts"] == 1  # finished where it started, not redelivered
            assert worker.wait(timeout=120) == 0
            assert gym.get(later.id).status == "queued"  # the stopping worker took no new work
