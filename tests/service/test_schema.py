"""Property-based: schemathesis generates requests from the API's own OpenAPI schema, valid and
invalid, and runs every check on each answer (no 5xx, status codes and bodies as documented, invalid
data refused, ...). In-process (ASGI) against a real Redis, fixed seed, a bounded number of examples."""

from __future__ import annotations

from collections.abc import Iterator

import hypothesis
import pytest
import redis
import schemathesis
from schemathesis import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.schemas import OpenApiSchema

from taskbench.service.app import create_app
from taskbench.settings import Settings

CONFIG = schemathesis.Config.from_dict({"seed": 13})


@pytest.fixture
def api_schema(redis_url: str, run_id: str, client: redis.Redis) -> Iterator[OpenApiSchema]:
    # `client` deletes every key under this test's run prefix afterwards
    app = create_app(Settings(backend="background", redis_url=redis_url, run_id=run_id))
    try:
        yield schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
    finally:
        asgi.shutdown_lifespans()  # close the app's Redis clients before its keys are deleted


# schemathesis.pytest.from_fixture needs a pytest internal (`Item._nodeid`) that pytest 9 removed,
# so the operations are driven here with Hypothesis, the way its pytest plugin does it
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_input_breaks_the_api(api_schema: OpenApiSchema, mode: GenerationMode) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {
        "GET /health", "POST /api/v1/incr/{kind}/{mode}/{backend}"}
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and operation.path == "/health":
            continue  # no parameter, no body: nothing to make invalid

        @hypothesis.seed(13)
        @hypothesis.settings(max_examples=100, deadline=None, database=None, derandomize=False,
                             suppress_health_check=list(hypothesis.HealthCheck))
        @hypothesis.given(operation.as_strategy(generation_mode=mode))
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate()

        check()
