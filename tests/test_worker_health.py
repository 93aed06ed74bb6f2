"""Which failures quarantine a GPU, and how a quarantined worker shows in readiness and metrics."""

from __future__ import annotations

import httpx
import pytest
import redis

from gym_worker.health import device_fault


@pytest.mark.parametrize(
    "message",
    [
        "the service could not evaluate this request: a reference child failed to start: CUDA init",
        "the service could not evaluate this request: the reference process died (killed by SIGSEGV) while x",
        "reference failed while forward():\nRuntimeError: CUDA error: an illegal memory access was encountered",
    ],
)
def test_device_faults_count_towards_quarantine(message):
    assert device_fault(message)


def test_a_bad_reference_is_not_a_device_fault():
    assert not device_fault("reference failed while get_inputs():\nNameError: name 'x' is not defined")


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
