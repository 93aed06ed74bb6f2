"""A property-based fuzzer driven by the gateway's own /openapi.json (schemathesis) against the real gateway and
Redis: for every operation, requests that follow the schema and requests that break it. No answer is a 5xx, and
every answer is one the schema documents: its status code, content type and body."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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

# Examples per operation and mode: about ten operations, a few hundred requests per mode.
EXAMPLES = 25
# /readyz says 503 by design here: this stack has no worker.
NOT_READY = ("GET", "/readyz", 503)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory) -> Iterator[schemathesis.BaseSchema]:
    """Redis and a development-mode gateway with no worker (nothing admitted runs): requests never wait and the
    rate limit is out of the way."""
    with LocalStack(tmp_path_factory.mktemp("fuzz")) as stack:
        stack.start_redis()
        stack.start_gateway(
            KERNELGYM_WAIT_MAX_S="0",
            KERNELGYM_RATE_LIMIT_PER_MINUTE="1000000",
            KERNELGYM_DEVICE_CLASSES='["h100"]',
        )
        yield schemathesis.openapi.from_url(stack.base_url + "/openapi.json")


@pytest.mark.parametrize("mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE])
def test_every_answer_is_a_documented_non_5xx(api_schema, mode):
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/evaluate", "/evaluate/batch", "/evaluations/{evaluation_id}"}
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def fuzz(case: schemathesis.Case) -> None:
            response = case.call(timeout=30)
            if (case.method, case.path, response.status_code) == NOT_READY:
                return
            case.validate_response(response, checks=CHECKS)

        try:
            fuzz()
        except Unsatisfiable:  # the schema admits every value of this operation's inputs: none to break
            assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
