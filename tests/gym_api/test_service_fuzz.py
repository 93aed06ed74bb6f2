"""A property-based fuzzer driven by the gateway's own /openapi.json (schemathesis) against the real gateway and
Redis: for every operation, requests that follow the schema and requests that break it. No answer is a 5xx, and
every answer is one the schema documents: its status code, content type and body."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
import redis
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from kernelgym.stack import LocalStack
from services.problems import bundled_problems

RELU = "level1/1_ReLU"

# Examples per operation and mode: about ten operations, a few hundred requests per mode.
EXAMPLES = 25
# /readyz says 503 by design here: this stack has no worker.
NOT_READY = ("GET", "/readyz", 503)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory) -> Iterator[LocalStack]:
    """Redis and a development-mode gateway with no worker (nothing admitted runs): requests never wait and the
    rate limit is out of the way."""
    with LocalStack(tmp_path_factory.mktemp("fuzz")) as stack:
        stack.start_redis()
        stack.start_gateway(
            KERNELGYM_WAIT_MAX_S="0",
            KERNELGYM_RATE_LIMIT_PER_MINUTE="1000000",
            KERNELGYM_DEVICE_CLASSES='["h100"]',
        )
        yield stack


@pytest.fixture(scope="module")
def api_schema(fuzz_stack) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(fuzz_stack.base_url + "/openapi.json")


def fuzz(operation: schemathesis.APIOperation, mode: schemathesis.GenerationMode, examples: int = EXAMPLES) -> list:
    """Run `examples` generated requests of `mode` against one operation, checking each answer; their codes."""
    codes = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        response = case.call(timeout=30)
        codes.append(response.status_code)
        if (case.method, case.path, response.status_code) == NOT_READY:
            return
        case.validate_response(response, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:  # the schema admits every value of this operation's inputs: none to break
        assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    return codes


@pytest.mark.parametrize("mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE])
def test_every_answer_is_a_documented_non_5xx(api_schema, mode):
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/evaluate", "/evaluate/batch", "/evaluations/{evaluation_id}"}
    for operation in operations:
        fuzz(operation, mode)


def test_refusals_of_failing_references_are_documented_answers(fuzz_stack, api_schema):
    """A reference that failed for the key (422) and a key paused for failing references (429 with Retry-After):
    the same checks, on the operations that take a reference."""
    r = redis.Redis.from_url(fuzz_stack.redis_url)
    reference = bundled_problems().load(RELU).source
    mark = f"kg:badref:dev:cpu:{hashlib.sha256(reference.encode()).hexdigest()}"
    r.set(mark, "the reference failed while calling get_inputs", ex=300)
    try:
        case = api_schema["/evaluate"]["POST"].Case(body={"candidate": "x", "reference": reference}, query={"wait": 0})
        response = case.call(timeout=30)
        assert response.status_code == 422 and "this reference failed on cpu" in response.text
        case.validate_response(response, checks=CHECKS)
        r.set("kg:refpause:dev", "1", ex=300)
        codes = []
        for path in ("/evaluate", "/evaluate/batch"):
            codes += fuzz(api_schema[path]["POST"], schemathesis.GenerationMode.POSITIVE)
        assert 429 in codes
    finally:
        r.delete(mark, "kg:refpause:dev")
