"""The service as a new user and as an attacker meet it: atomic batches, one id per submission, body limits,
no echoed input, NUL bytes, Idempotency-Key conflicts, device classes, failure counts, set-up trip-ups.
Real Redis, the real gateway over HTTP, real Celery workers (the shared `stack`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import redis
from helpers import bundled_source, unique

from gym_api.app import ITEM_MAX_BYTES
from gym_client import KernelGymClient, KernelGymError
from kernelgym.stack import LocalStack, free_port

RELU = "level1/1_ReLU"
ROOT = Path(__file__).resolve().parents[2]


def queued_body(**extra: object) -> dict:
    """A submission no worker takes (`h100` has none in these stacks), so it stays queued until cancelled."""
    return {"candidate": unique(bundled_source(RELU)), "problem_id": RELU, "device_class": "h100", **extra}


def job_keys(stack: LocalStack) -> set[bytes]:
    return set(redis.Redis.from_url(stack.redis_url).scan_iter(match="kg:job:*", count=1000))


def metric(text: str, sample: str) -> float:
    match = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


@pytest.fixture(scope="module")
def two_keys(stack, tmp_path_factory):
    """A gateway with two API keys on the shared stack's Redis and workers, at most 6 unfinished evaluations
    per key; yields (gateway, client of key A, client of key B)."""
    keys = [f"kg-{name}-{uuid.uuid4().hex}" for name in "ab"]
    gateway = LocalStack(tmp_path_factory.mktemp("two-keys"))
    gateway.redis_port = stack.redis_port
    gateway.start_gateway(
        KERNELGYM_DEV_MODE="false",
        KERNELGYM_API_KEY_HASHES=json.dumps([hashlib.sha256(k.encode()).hexdigest() for k in keys]),
        KERNELGYM_DEVICE_CLASSES='["h100"]',
        KERNELGYM_MAX_QUEUED_PER_KEY="6",
    )
    a, b = (KernelGymClient(gateway.base_url, api_key=k, timeout=30) for k in keys)
    yield gateway, a, b
    a.close()
    b.close()
    gateway.close()


# -- batches are all or nothing ------------------------------------------------------------------------------
def test_a_batch_with_unusable_items_submits_nothing_and_names_them(stack):
    before = job_keys(stack)
    items = [queued_body(), queued_body(problem_id="level9/nope"), queued_body(), queued_body(device_class="b200")]
    r = httpx.post(stack.base_url + "/evaluate/batch", json={"items": items}, timeout=30)
    assert r.status_code == 404, r.text
    detail = r.json()["detail"]
    assert "nothing was submitted" in detail and "items[1]" in detail and "items[3]" in detail
    assert "items[0]" not in detail and "items[2]" not in detail
    items[1] = {**queued_body(), "options": {"atol": -1}}
    r = httpx.post(stack.base_url + "/evaluate/batch", json={"items": items}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][:3] == ["body", "items", 1]
    assert job_keys(stack) == before


def test_a_batch_over_the_keys_limit_submits_nothing(two_keys):
    _, a, _ = two_keys
    with pytest.raises(KernelGymError) as err:
        a.evaluate_batch([queued_body() for _ in range(7)])
    assert err.value.status_code == 429
    # Nothing of it counts against the key: a batch within the limit still goes through.
    within = a.evaluate_batch([queued_body() for _ in range(6)])
    assert {e.status for e in within} == {"queued"}
    for e in within:
        a.cancel(e.id)


def test_concurrent_requests_of_one_key_cannot_pass_its_limit_together(two_keys):
    _, _, b = two_keys

    def submit(_: int) -> str | int:
        try:
            return b.evaluate_batch([queued_body()])[0].id
        except KernelGymError as exc:
            return exc.status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(submit, range(12)))
    admitted = [a for a in answers if isinstance(a, str)]
    assert len(admitted) == 6 and sorted(a for a in answers if isinstance(a, int)) == [429] * 6
    for evaluation_id in admitted:
        b.cancel(evaluation_id)


# -- every submission has its own id; a shared evaluation stops only when nobody wants it ----------------------
def test_identical_submissions_of_two_keys_have_their_own_ids_and_cancellations(two_keys, stack):
    _, a, b = two_keys
    body = queued_body()
    mine = a.evaluate(body["candidate"], problem_id=RELU, device_class="h100", wait=0)
    theirs = b.evaluate(body["candidate"], problem_id=RELU, device_class="h100", wait=0)
    assert theirs.id != mine.id and theirs.cached and theirs.status == "queued"
    for call in (lambda: a.get(theirs.id), lambda: a.cancel(theirs.id)):
        with pytest.raises(KernelGymError) as err:
            call()
        assert err.value.status_code == 404
    r = redis.Redis.from_url(stack.redis_url)
    job = f"kg:job:{r.hget(f'kg:sub:{mine.id}', 'job').decode()}"
    assert a.cancel(mine.id).status == "cancelled"
    assert b.get(theirs.id).status == "queued" and r.hget(job, "status") == b"queued" and not r.hget(job, "cancel")
    assert b.cancel(theirs.id).status == "cancelled"
    assert r.hget(job, "status") == b"cancelled"


def test_a_cached_result_comes_back_at_once_to_another_key_and_stays_marked_cached(two_keys):
    _, a, b = two_keys
    source = unique(bundled_source(RELU))
    first = a.evaluate(source, problem_id=RELU, wait=120)
    assert first.verdict == "passed" and not first.cached
    t0 = time.perf_counter()
    again = b.evaluate(source, problem_id=RELU, wait=120)
    assert time.perf_counter() - t0 < 2.0
    assert again.id != first.id and again.cached and again.status == "done" and again.result == first.result
    assert b.get(again.id).cached and not a.get(first.id).cached


# -- Idempotency-Key ----------------------------------------------------------------------------------------
def test_an_idempotency_key_replayed_with_another_body_is_409(stack):
    key = {"Idempotency-Key": uuid.uuid4().hex}
    body = queued_body()
    first = httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, headers=key, timeout=30)
    same = httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, headers=key, timeout=30)
    assert first.status_code == same.status_code == 202 and same.json()["id"] == first.json()["id"]
    for other in (queued_body(), {**body, "problem_id": "level9/nope"}):
        r = httpx.post(stack.base_url + "/evaluate", json=other, params={"wait": 0}, headers=key, timeout=30)
        assert r.status_code == 409 and "different request body" in r.json()["detail"]
    httpx.delete(stack.base_url + first.json()["status_url"], timeout=30)


# -- size limits per route, and no echo ---------------------------------------------------------------------
def test_bodies_over_a_routes_limit_are_413_before_they_are_read(stack):
    huge = {"candidate": "x" * (20 * 1024 * 1024), "problem_id": RELU}
    t0 = time.perf_counter()
    r = httpx.post(stack.base_url + "/evaluate", json=huge, timeout=60)
    assert r.status_code == 413 and len(r.content) < 200 and time.perf_counter() - t0 < 5

    def chunks():  # no content-length: refused while streaming
        for _ in range(64):
            yield b"x" * 65536

    r = httpx.post(
        stack.base_url + "/evaluate", content=chunks(), headers={"content-type": "application/json"}, timeout=60
    )
    assert r.status_code == 413
    assert httpx.request("GET", stack.base_url + "/problems", content=b"x" * 100_000, timeout=30).status_code == 413
    # A batch may be larger than one submission: three 200 KB items pass the batch route's limit.
    items = [{**queued_body(), "candidate": unique(bundled_source(RELU)) + "#" * 200_000} for _ in range(3)]
    r = httpx.post(stack.base_url + "/evaluate/batch", json={"items": items}, timeout=60)
    assert r.status_code == 200, r.text
    for e in r.json()["evaluations"]:
        httpx.delete(stack.base_url + e["status_url"], timeout=30)


def test_a_reference_too_deep_for_the_parser_is_422(stack):
    body = {"candidate": "x", "reference": "x = " + "-" * 100_000 + "1", "device_class": "h100"}
    r = httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"] == (
        "reference: reference is not valid Python (nested too deeply for Python's parser)"
    )


@pytest.mark.parametrize(
    "bomb",
    ["x = " + "-" * 100_000 + "1", "x = " + "1+" * 50_000 + "1"],  # the parser's MemoryError, RecursionError
    ids=["memory", "recursion"],
)
def test_a_candidate_too_deep_for_the_parser_gets_a_verdict_and_the_worker_lives_on(stack, gym, bomb):
    ev = gym.evaluate(unique(f"class ModelNew:\n    pass\n{bomb}\n"), problem_id=RELU, wait=120)
    assert ev.status == "done" and ev.verdict in ("compile_error", "runtime_error"), ev.raw
    assert all(w.poll() is None for w in stack.workers)


def test_a_rejected_input_is_not_echoed(stack):
    r = httpx.post(stack.base_url + "/evaluate", json={"candidate": "y" * 300_000, "problem_id": RELU}, timeout=30)
    assert r.status_code == 422 and len(r.content) < 1000 and "yyyy" not in r.text
    assert r.json()["detail"][0]["loc"] == ["body", "candidate"]
    r = httpx.post(stack.base_url + "/evaluate", json={"candidate": "x", "problem_id": RELU, "priority": "urgent"})
    assert r.status_code == 422 and r.json()["detail"][0]["input"] == "urgent"  # short values still help
    r = httpx.post(stack.base_url + "/evaluate", json={"candidate": "x", "problem_id": RELU, "k" * 400_000: 1})
    assert r.status_code == 422 and len(r.content) < 1000 and r.json()["detail"][0]["loc"][1].startswith("kkk")
    many = {"candidate": "x", "problem_id": RELU, **{f"unknown_{i}": i for i in range(10_000)}}
    r = httpx.post(stack.base_url + "/evaluate", json=many, timeout=30)
    assert r.status_code == 422 and len(r.content) < 10_000
    assert r.json()["detail"][-1]["msg"] == "and 9980 more invalid field(s) not listed"


def test_a_batch_of_more_items_than_any_batch_may_hold_is_refused_before_they_are_checked(stack):
    t0 = time.perf_counter()
    r = httpx.post(stack.base_url + "/evaluate/batch", json={"items": [{}] * 100_000}, timeout=60)
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "too_long", r.text[:500]
    assert time.perf_counter() - t0 < 10


# -- NUL bytes, paths and unknown problems ---------------------------------------------------------------------
@pytest.mark.parametrize("problem_id", [RELU + "\x00", "level1/\x001_ReLU", "../../etc/passwd", "level9/nope"])
def test_unknown_problem_ids_are_404_without_the_servers_paths(stack, problem_id):
    body = {"candidate": "x", "problem_id": problem_id, "device_class": "h100"}
    r = httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, timeout=30)
    assert r.status_code == 404 and "unknown problem id" in r.text
    got = httpx.get(stack.base_url + "/problems/" + quote(problem_id, safe=""), timeout=30)
    assert got.status_code == 404, got.text
    for text in (r.text, got.text):
        assert str(ROOT) not in text and "bundled" not in text


def test_get_problems_with_an_encoded_nul_is_404(stack):
    r = httpx.get(stack.base_url + "/problems/level1%2F1_ReLU%00", timeout=30)
    assert r.status_code == 404 and "GET /problems" in r.json()["detail"]


# -- device classes, queues and failure counts ------------------------------------------------------------------
def test_a_device_class_no_worker_serves_is_refused_naming_the_live_ones(stack):
    body = {**queued_body(), "device_class": "b200"}
    r = httpx.post(stack.base_url + "/evaluate", json=body, params={"wait": 0}, timeout=30)
    assert r.status_code == 422 and "'b200'" in r.json()["detail"] and "live classes: cpu" in r.json()["detail"]
    # A class the operator lists is accepted with no worker, and its queue shows in /metrics and /readyz.
    held = httpx.post(stack.base_url + "/evaluate", json=queued_body(), params={"wait": 0}, timeout=30)
    assert held.status_code == 202
    text = httpx.get(stack.base_url + "/metrics", timeout=30).text
    assert metric(text, 'kernelgym_queue_depth{queue="kg.h100.normal"}') >= 1
    ready = httpx.get(stack.base_url + "/readyz", timeout=30).json()
    assert ready["queued"]["h100"] >= 1 and ready["unserved"]["h100"] == ready["queued"]["h100"]
    assert "cpu" not in ready["unserved"]
    httpx.delete(stack.base_url + held.json()["status_url"], timeout=30)


def test_failed_and_cancelled_evaluations_are_counted(stack, gym, problems):
    def counts() -> tuple[float, float]:
        text = httpx.get(stack.base_url + "/metrics", timeout=30).text
        sample = 'kernelgym_evaluations_finished_total{{status="{}"}}'
        return metric(text, sample.format("failed")), metric(text, sample.format("cancelled"))

    failed, cancelled = counts()
    held = gym.evaluate(unique(bundled_source(RELU)), problem_id=RELU, device_class="h100", wait=0)
    gym.cancel(held.id)
    reference = problems.load(RELU).source + "\n\ndef get_init_inputs():\n    raise ValueError('no inputs')\n"
    broken = gym.evaluate(unique(bundled_source(RELU)), reference=reference, wait=120)
    assert broken.status == "failed", broken.raw
    assert counts() == (failed + 1, cancelled + 1)


# -- what a new user trips on -----------------------------------------------------------------------------------
def test_a_form_encoded_body_is_told_to_send_json(stack):
    # What `curl -d '{...}'` sends without -H 'content-type: application/json'.
    body = json.dumps({"candidate": "x", "problem_id": RELU}).encode()
    for headers in ({"content-type": "application/x-www-form-urlencoded"}, {}):
        r = httpx.post(stack.base_url + "/evaluate", content=body, headers=headers, timeout=30)
        assert r.status_code == 415 and r.json()["detail"] == "send JSON (content-type: application/json)"


@pytest.mark.parametrize("command", [["serve"], ["worker"], ["healthcheck", "worker"]])
def test_a_bare_digest_in_api_key_hashes_is_one_line_saying_what_is_expected(command):
    env = {**os.environ, "KERNELGYM_API_KEY_HASHES": "a" * 64, "KERNELGYM_PORT": str(free_port())}
    done = subprocess.run(
        [sys.executable, "-m", "kernelgym", *command], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kernelgym {command[0]}: "), lines
    assert "JSON list of SHA-256 hex digests" in lines[0] and "hash-key" in lines[0], lines


def test_the_readmes_python_client_example_runs_as_written(stack):
    readme = (ROOT / "README.md").read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.DOTALL) if "KernelGymClient" in b)
    assert "http://127.0.0.1:8000" in example
    done = subprocess.run(
        [sys.executable, "-c", example.replace("http://127.0.0.1:8000", stack.base_url)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[0] == "passed"


# -- rejected requests are counted; failed references cost their key -------------------------------------------
def test_refused_bodies_are_counted_in_the_request_metrics(stack):
    def count(code: int) -> float:
        text = httpx.get(stack.base_url + "/metrics", timeout=30).text
        return metric(text, f'kernelgym_http_requests_total{{code="{code}",method="POST",route="/evaluate"}}')

    before = count(413), count(415)
    too_large = b"x" * (ITEM_MAX_BYTES + 1)
    json_type = {"content-type": "application/json"}
    assert httpx.post(stack.base_url + "/evaluate", content=too_large, headers=json_type, timeout=30).status_code == 413
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert httpx.post(stack.base_url + "/evaluate", content=b"a=1", headers=form, timeout=30).status_code == 415
    assert (count(413), count(415)) == (before[0] + 1, before[1] + 1)


def worker_lines(stack: LocalStack, evaluation_id: str) -> list[dict]:
    lines = []
    for path in stack.dir.glob("worker*.log"):
        text = path.read_text(errors="replace")
        lines += [json.loads(x) for x in text.splitlines() if x.startswith("{") and evaluation_id in x]
    return lines


def test_a_failed_reference_is_refused_at_once_for_its_key_and_failing_keys_are_paused(two_keys, stack, problems):
    _, a, b = two_keys
    candidate = bundled_source(RELU)
    base = problems.load(RELU).source + "\n\ndef get_init_inputs():\n    raise ValueError('no inputs')\n"
    broken = [f"{base}\n# {uuid.uuid4().hex}\n" for _ in range(3)]
    first = a.evaluate(candidate, reference=broken[0], wait=120)
    assert first.status == "failed" and first.error.startswith("the reference failed"), first.raw
    job = redis.Redis.from_url(stack.redis_url).hget(f"kg:sub:{first.id}", "job").decode()
    (finished,) = [x for x in worker_lines(stack, job) if x["message"] == "evaluation finished"]
    assert finished["status"] == "failed" and finished["error"].startswith("the reference failed")
    # The same reference from the same key is refused before it runs; another key's runs (and fails on its own).
    with pytest.raises(KernelGymError) as refused:
        a.evaluate(unique(candidate), reference=broken[0], wait=0)
    assert refused.value.status_code == 422 and "this reference failed on cpu" in str(refused.value)
    assert b.evaluate(candidate, reference=broken[0], wait=120).status == "failed"
    # Past two failures in the window, the key sends no inline reference for a while; its problem ids still go.
    for reference in broken[1:]:
        assert a.evaluate(candidate, reference=reference, wait=120).status == "failed"
    with pytest.raises(KernelGymError) as paused:
        a.evaluate(unique(candidate), reference=problems.load(RELU).source, wait=0)
    assert paused.value.status_code == 429 and 0 < paused.value.retry_after <= 60, paused.value
    assert "failed too often" in str(paused.value)
    held = [
        a.evaluate(unique(candidate), problem_id=RELU, device_class="h100", wait=0),
        b.evaluate(unique(candidate), reference=problems.load(RELU).source, device_class="h100", wait=0),
    ]
    assert [e.status for e in held] == ["queued", "queued"]
    a.cancel(held[0].id)
    b.cancel(held[1].id)
