"""The HTTP API against a live stack: real Redis, real Celery workers (CPU interpreter), real HTTP."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import httpx
import pytest
import redis
from helpers import bundled_source, relu_candidate, unique

from gym_client import KernelGymClient, KernelGymError

RELU = "level1/1_ReLU"


def test_evaluate_waits_for_the_result(gym):
    ev = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, wait=120)
    assert ev.status == "done" and ev.verdict == "passed" and ev.correct
    assert ev.result["problem"] == RELU and ev.result["environment"]["device"] == "cpu"
    assert not ev.cached


def test_inline_reference_source(gym, problems):
    reference = problems.load(RELU).source
    ev = gym.evaluate(unique(bundled_source(RELU)), reference=reference, wait=120)
    assert ev.verdict == "passed" and ev.result["problem"] == "reference"


def test_wrong_kernel_gets_its_verdict_and_feedback(gym):
    ev = gym.evaluate(relu_candidate("return triton_relu(x) + 1.0"), problem_id=RELU, wait=120)
    assert ev.verdict == "incorrect" and "mismatch" in ev.feedback.lower()


def test_wait_zero_answers_202_then_the_status_url_gives_the_result(stack):
    body = {"candidate": unique(bundled_source(RELU)), "problem_id": RELU}
    r = httpx.post(stack.base_url + "/evaluate", params={"wait": 0}, json=body, timeout=30)
    assert r.status_code == 202 and r.json()["status"] in ("queued", "running")
    url = stack.base_url + r.json()["status_url"]
    done = httpx.get(url, params={"wait": 120}, timeout=150)
    assert done.status_code == 200 and done.json()["result"]["verdict"] == "passed"


def test_batch_runs_every_item(gym):
    items = [gym.submission(unique(bundled_source(RELU)), problem_id=RELU) for _ in range(3)]
    items.append(gym.submission(relu_candidate("return triton_relu(x) * 2.0"), problem_id=RELU))
    evaluations = gym.evaluate_batch(items, wait=0)
    assert len({e.id for e in evaluations}) == 4
    finished = [gym.wait(e.id, timeout=240) for e in evaluations]
    assert [e.verdict for e in finished] == ["passed", "passed", "passed", "incorrect"]


def test_identical_submission_is_served_from_the_cache_unless_forced(gym):
    source = unique(bundled_source(RELU))
    first = gym.evaluate(source, problem_id=RELU, wait=120)
    t0 = time.perf_counter()
    again = gym.evaluate(source, problem_id=RELU, wait=120)
    assert again.cached and again.id != first.id and again.result == first.result
    assert time.perf_counter() - t0 < 2.0
    other_options = gym.evaluate(source, problem_id=RELU, options={"correctness_trials": 1}, wait=0)
    assert not other_options.cached
    forced = gym.evaluate(source, problem_id=RELU, force=True, wait=120)
    assert not forced.cached and forced.id != first.id and forced.verdict == "passed"


def test_workers_share_and_reuse_a_stored_reference_timing(gym, stack, problems):
    reference = problems.load(RELU).source + f"\n# {uuid.uuid4().hex}\n"  # a reference no other test timed
    first = gym.evaluate(unique(bundled_source(RELU)), reference=reference, wait=120)
    second = gym.evaluate(unique(bundled_source(RELU)), reference=reference, wait=120)
    assert first.result["timings_from_cache"] == []
    assert second.result["timings_from_cache"] == ["reference"]
    assert second.result["reference_runtime"] == first.result["reference_runtime"]
    r = redis.Redis.from_url(stack.redis_url)
    keys = r.keys("kg:reftime:*")
    assert keys and all(0 < r.ttl(k) <= 86_400 for k in keys)


def test_a_reference_timing_claim_in_redis_has_one_owner_and_expires(stack):
    from gym_common.jobs import Keys
    from gym_worker.tasks import RedisTimingStore

    store = RedisTimingStore(redis.Redis.from_url(stack.redis_url), Keys("kg"), ttl_s=60)
    key = uuid.uuid4().hex
    assert store.claim(key, "a", 60) and not store.claim(key, "b", 60) and store.claim(key, "a", 60)
    store.unclaim(key, "b")
    assert not store.claim(key, "b", 60)
    store.unclaim(key, "a")
    assert store.claim(key, "b", 0.05)
    time.sleep(0.1)
    assert store.claim(key, "a", 60)


def test_idempotency_key_returns_the_same_evaluation(gym):
    key, source = uuid.uuid4().hex, unique(bundled_source(RELU))
    a = gym.evaluate(source, problem_id=RELU, wait=0, idempotency_key=key)
    b = gym.evaluate(source, problem_id=RELU, wait=0, idempotency_key=key)
    assert a.id == b.id


def test_cancelled_queued_evaluation_never_runs(gym, stack):
    # No worker serves this device class, so the evaluation stays queued until cancelled.
    ev = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, device_class="h100", wait=0)
    assert ev.status == "queued"
    cancelled = gym.cancel(ev.id)
    assert cancelled.status == "cancelled" and cancelled.result is None
    assert gym.get(ev.id).raw["attempts"] == 0


def test_cancelling_a_running_evaluation_stops_it(gym):
    slow = relu_candidate("import time\ntime.sleep(30)\nreturn triton_relu(x)")
    ev = gym.evaluate(slow, problem_id=RELU, wait=0)
    deadline = time.monotonic() + 120
    while gym.get(ev.id).status != "running":
        assert time.monotonic() < deadline, "never started"
        time.sleep(0.2)
    t0 = time.monotonic()
    gym.cancel(ev.id)
    final = gym.wait(ev.id, timeout=30)
    assert final.status == "cancelled" and final.result is None
    assert time.monotonic() - t0 < 15


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"problem_id": RELU}, "candidate"),
        ({"candidate": "x", "problem_id": RELU, "reference": "y"}, "exactly one"),
        ({"candidate": "x"}, "exactly one"),
        ({"candidate": "x", "problem_id": RELU, "surprise": 1}, "surprise"),
        ({"candidate": "x", "problem_id": RELU, "options": {"atol": -1}}, "atol"),
        ({"candidate": "x", "problem_id": RELU, "priority": "urgent"}, "priority"),
        ({"candidate": "x" * (256 * 1024 + 1), "problem_id": RELU}, "candidate"),
        ({"candidate": "x", "reference": "def broken(:"}, "not valid Python"),
        ({"candidate": "x", "reference": "x = 1"}, "must define"),
        ({"candidate": "x", "problem_id": RELU, "device_class": "cpu", "options": {"device": "cuda"}}, "device"),
    ],
)
def test_malformed_requests_get_a_clear_4xx(stack, body, fragment):
    r = httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, timeout=30)
    assert r.status_code == 422, r.text
    assert fragment in r.text


def test_invalid_json_is_422(stack):
    r = httpx.post(
        stack.base_url + "/evaluate", content=b"{not json", headers={"content-type": "application/json"}, timeout=30
    )
    assert r.status_code == 422


def test_oversized_body_is_refused_before_it_is_read(stack):
    r = httpx.post(stack.base_url + "/evaluate", content=b"x" * (300 * 1024 * 1024), timeout=60)
    assert r.status_code == 413


def test_unknown_problem_and_evaluation_are_404(gym):
    with pytest.raises(KernelGymError) as err:
        gym.evaluate("x", problem_id="level9/nope", wait=0)
    assert err.value.status_code == 404
    with pytest.raises(KernelGymError) as err:
        gym.get(uuid.uuid4().hex)
    assert err.value.status_code == 404


def test_problems_are_listed_with_their_sources(gym, problems):
    assert gym.problems() == problems.ids()
    assert "class Model" in gym.problem(RELU)


def test_health_readiness_metrics_and_openapi(stack, gym):
    assert httpx.get(stack.base_url + "/healthz").json() == {"status": "alive"}
    ready = gym.ready()
    assert ready["status_code"] == 200 and ready["workers"] >= 2 and ready["device_classes"] == ["cpu"]
    gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, wait=120)
    text = httpx.get(stack.base_url + "/metrics").text
    for name in (
        'kernelgym_http_requests_total{code="200",method="POST",route="/evaluate"}',
        'kernelgym_queue_depth{queue="kg.cpu.normal"}',
        'kernelgym_evaluations_total{verdict="passed"}',
        "kernelgym_evaluation_duration_seconds_bucket",
        'kernelgym_workers_alive{device_class="cpu",quarantined="false"} 2.0',
        "kernelgym_cache_hits_total",
    ):
        assert name in text, name
    schema = httpx.get(stack.base_url + "/openapi.json").json()
    assert {"/evaluate", "/evaluate/batch", "/evaluations/{evaluation_id}", "/problems"} <= set(schema["paths"])


def test_the_gateway_never_imports_torch():
    code = "import sys, gym_api.app, gym_api.serve, gym_client; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- authentication and limits: a second gateway on the same Redis, with keys ------------------------------
@pytest.fixture(scope="module")
def keyed(stack, tmp_path_factory):
    """A gateway with one API key, a rate limit of 20 per minute and at most 2 unfinished evaluations."""
    import hashlib

    from kernelgym.stack import LocalStack

    key = "kg-test-" + uuid.uuid4().hex
    other = LocalStack(tmp_path_factory.mktemp("keyed"))
    other.redis_port = stack.redis_port  # share the first stack's Redis and workers
    other.start_gateway(
        KERNELGYM_DEV_MODE="false",
        KERNELGYM_API_KEY_HASHES=f'["{hashlib.sha256(key.encode()).hexdigest()}"]',
        KERNELGYM_RATE_LIMIT_PER_MINUTE="20",
        KERNELGYM_MAX_QUEUED_PER_KEY="2",
        KERNELGYM_DEVICE_CLASSES='["a100"]',
    )
    yield other, key
    other.close()


def test_requests_without_a_valid_key_are_401(keyed):
    gateway, _ = keyed
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        r = httpx.get(gateway.base_url + "/problems", headers=headers)
        assert r.status_code == 401 and "WWW-Authenticate" in r.headers


def test_a_valid_key_is_accepted_and_limits_apply(keyed):
    gateway, key = keyed
    with KernelGymClient(gateway.base_url, api_key=key) as gym:
        assert "level1/1_ReLU" in gym.problems()
        for _ in range(2):  # held queued: no worker serves this class
            gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, device_class="a100", wait=0)
        with pytest.raises(KernelGymError) as err:
            gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, device_class="a100", wait=0)
        assert err.value.status_code == 429 and "unfinished" in str(err.value)
        with pytest.raises(KernelGymError) as err:
            for _ in range(25):
                gym.problems()
        assert err.value.status_code == 429 and "rate limit" in str(err.value)
        assert 0 < err.value.retry_after <= 60  # the client carries the service's Retry-After


def test_development_mode_is_refused_on_a_public_address():
    from gym_api.serve import UnsafeConfiguration, check_auth
    from gym_common.settings import ServiceSettings

    with pytest.raises(UnsafeConfiguration, match="loopback"):
        check_auth(ServiceSettings(dev_mode=True, host="0.0.0.0"))
    with pytest.raises(UnsafeConfiguration, match="no API keys"):
        check_auth(ServiceSettings(host="127.0.0.1"))
    check_auth(ServiceSettings(dev_mode=True, host="127.0.0.1"))
    check_auth(ServiceSettings(host="0.0.0.0", api_key_hashes=["0" * 64]))
