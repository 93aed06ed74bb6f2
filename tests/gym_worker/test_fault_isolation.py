"""A candidate's fault reaches no other evaluation: honest candidates sent in one batch with candidates that exit
their process, segfault, hang or (on a GPU) access memory illegally, in flight together on every worker, each get
their own verdict, and every worker stays in service. On CPU through the shared stack's CPU workers; on a host of
two or more GPUs, through a worker on each GPU."""

from __future__ import annotations

import httpx
import pytest
import redis
import torch
from conftest import WORKER_ENV
from helpers import WILD_ACCESS, bundled_source, relu_candidate, unique

from gym_client import KernelGymClient
from kernelgym.stack import LocalStack

RELU = "level1/1_ReLU"
OS = "__import__('o' + 's')"
# Each fault with the verdicts its own evaluation may get.
FAULTS = {
    "os_exit": (relu_candidate(f"{OS}._exit(3)"), {"crashed"}),
    "segfault": (relu_candidate(f"{OS}.kill({OS}.getpid(), 11)"), {"crashed"}),
    "hang": (relu_candidate("y = triton_relu(x)\nwhile True:\n    pass"), {"timeout"}),
}


def faults_beside_honest_kernels(gym: KernelGymClient, faults: dict[str, tuple[str, set[str]]], honest: int) -> None:
    """`honest` correct candidates and the `faults`, interleaved in one batch; every one's own verdict."""
    sent = [("honest", unique(bundled_source(RELU)), {"passed"}) for _ in range(honest)]
    for n, (name, (source, verdicts)) in enumerate(faults.items()):
        sent.insert(1 + 2 * n, (name, unique(source), verdicts))
    evaluations = gym.evaluate_batch([gym.submission(source, problem_id=RELU) for _, source, _ in sent])
    got = {}
    for n, ((name, _, _), ev) in enumerate(zip(sent, evaluations, strict=True)):
        done = gym.wait(ev.id, timeout=600)
        got[f"{name}#{n}"] = done.verdict or f"{done.status}: {done.error}"
    expected = {f"{name}#{n}": verdicts for n, (name, _, verdicts) in enumerate(sent)}
    assert all(got[label] in verdicts for label, verdicts in expected.items()), got


def no_worker_quarantined(stack: LocalStack) -> None:
    assert httpx.get(stack.base_url + "/readyz", timeout=30).status_code == 200
    r = redis.Redis.from_url(stack.redis_url)
    assert {r.hget(worker, "quarantined") for worker in r.scan_iter(match="kg:worker:*")} == {b"0"}


def test_a_candidates_fault_reaches_no_other_evaluation(stack):
    with KernelGymClient(stack.base_url, timeout=60) as gym:
        faults_beside_honest_kernels(gym, FAULTS, honest=3)
    no_worker_quarantined(stack)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs or more")
def test_a_candidates_fault_reaches_no_other_evaluation_on_several_gpus(tmp_path):
    gpus = torch.cuda.device_count()
    faults = {**FAULTS, "illegal_access": (WILD_ACCESS, {"runtime_error", "crashed"})}
    env = {**WORKER_ENV, "KERNELGYM_GPU_LOCK_DIR": str(tmp_path / "locks")}
    with LocalStack(tmp_path / "stack", device_class="h100", env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        for gpu in range(gpus):
            stack.start_worker(gpu=gpu)
        stack.wait_ready(workers=gpus, timeout=300)
        with KernelGymClient(stack.base_url, timeout=60) as gym:
            faults_beside_honest_kernels(gym, faults, honest=4 * gpus)
        no_worker_quarantined(stack)
