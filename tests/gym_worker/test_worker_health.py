"""Which failures quarantine a GPU: only what the trusted parent saw the machine do, confirmed by a probe."""

from __future__ import annotations

import time

import httpx
import pytest
import redis
from conftest import WORKER_ENV
from helpers import bundled_source, small_relu_reference

from gym_client import KernelGymClient
from gym_worker.health import DeviceHealth, probe
from kernelgym.stack import LocalStack
from services.errors import InfrastructureFault, ReferenceFailed
from services.evaluator import Evaluator
from services.problems import Problem
from services.schema import EvalOptions
from services.settings import EvalSettings

RELU = "level1/1_ReLU"
NO_TIMING = EvalOptions(device="cpu", timing=False)
# The attack: a request's own reference that raises what a sick GPU would print.
CUDA_LIE = 'raise RuntimeError("CUDA error: an illegal memory access was encountered")'


@pytest.fixture(scope="module")
def unstartable() -> Evaluator:
    """An evaluator whose children can never start in time: what a dead device looks like to the parent."""
    with Evaluator(EvalSettings(child_start_timeout_s=0.01, warm_children=0)) as ev:
        yield ev


@pytest.mark.parametrize(
    "body", [CUDA_LIE, "__import__('os')._exit(3)"], ids=["prints_a_cuda_error", "kills_its_process"]
)
def test_a_failing_reference_is_the_requests_fault_whatever_it_says(evaluator, body):
    reference = Problem(id="liar", source=small_relu_reference(body))
    with pytest.raises(ReferenceFailed):
        evaluator.evaluate(reference, bundled_source(RELU), NO_TIMING)


def test_a_child_that_cannot_start_is_an_infrastructure_fault(unstartable, relu):
    with pytest.raises(InfrastructureFault, match="failed to start"):
        unstartable.evaluate(relu, bundled_source(RELU), NO_TIMING)


def test_the_probe_confirms_before_quarantine_and_lifts_it(evaluator, unstartable, tmp_path):
    current = [evaluator]
    health = DeviceHealth(2, lambda: probe(current[0], "cpu"), tmp_path / "cpu.quarantined")
    assert not health.fault() and not health.fault()  # suspected twice, but the probe passes
    assert not health.quarantined and health.suspicions == 0
    current[0] = unstartable
    assert not health.fault() and health.fault()
    assert health.quarantined and "InfrastructureFault" in health.last_probe
    assert not health.recheck() and health.quarantined
    # Another process on the device sees the quarantine, and waits its turn to probe.
    other = DeviceHealth(2, lambda: probe(evaluator, "cpu"), tmp_path / "cpu.quarantined")
    assert other.quarantined and not other.recheck(min_interval_s=60)
    current[0] = evaluator
    assert health.recheck() and not health.quarantined and not other.quarantined


def test_no_request_can_quarantine_a_gpu_worker(tmp_path):
    """Through the real service: a GPU-class worker (evaluating on CPU, standing in for the device only)
    gets the lying reference more times than the quarantine threshold and stays in service."""
    env = {
        **WORKER_ENV,
        "KERNELGYM_WORKER_DEVICE": "cpu",
        "KERNELGYM_QUARANTINE_AFTER": "2",
        "KERNELGYM_HEARTBEAT_S": "1",
        "KERNELGYM_GPU_LOCK_DIR": str(tmp_path / "locks"),
    }
    with LocalStack(tmp_path, device_class="h100", env=env) as stack:
        stack.start_redis()
        stack.start_gateway()
        stack.start_worker()
        stack.wait_ready()
        with KernelGymClient(stack.base_url, timeout=30) as gym:
            # The last one forks (the sandbox refuses it in a reference as in a candidate): the request's fault too.
            for body in (CUDA_LIE, "__import__('os')._exit(3)", "__import__('os').fork()"):
                ev = gym.evaluate(bundled_source(RELU), reference=small_relu_reference(body), wait=120)
                assert ev.status == "failed" and "reference" in ev.error
            assert gym.evaluate(bundled_source(RELU), problem_id=RELU, wait=200).verdict == "passed"
        time.sleep(2)  # a heartbeat after the last evaluation
        assert httpx.get(stack.base_url + "/readyz").status_code == 200
        r = redis.Redis.from_url(stack.redis_url)
        assert {r.hget(worker, "quarantined") for worker in r.scan_iter(match="kg:worker:*")} == {b"0"}


def test_a_quarantined_worker_is_not_ready_capacity(stack):
    """A worker's heartbeat is the contract: a quarantined one is reported, not counted as ready."""
    r = redis.Redis.from_url(stack.redis_url)
    key = "kg:worker:h100@test:1"
    r.hset(key, mapping={"device_class": "h100", "device": "cuda", "quarantined": "1", "current": "", "seen": "0"})
    r.expire(key, 30)
    try:
        ready = httpx.get(stack.base_url + "/readyz").json()
        assert ready["quarantined"] == 1 and "h100" not in ready["device_classes"]
        metrics = httpx.get(stack.base_url + "/metrics").text
        assert 'kernelgym_workers_alive{device_class="h100",quarantined="true"} 1.0' in metrics
        assert 'kernelgym_queue_depth{queue="kg.h100.high"}' in metrics
    finally:
        r.delete(key)
