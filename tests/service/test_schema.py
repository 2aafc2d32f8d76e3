"""Property-based: schemathesis generates requests from the API's own OpenAPI schema, valid and
invalid, and runs every check on each answer (no 5xx, status codes and bodies as documented, invalid
data refused, ...). In-process (ASGI) against a real Redis, and over HTTP against a real API process
with bodies schemathesis never sends (lone surrogates, UTF-16 and UTF-32, random bytes); fixed seed, a
bounded number of examples."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import redis
import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis import GenerationMode, checks
from schemathesis.core import NotSet
from schemathesis.python import asgi
from schemathesis.specs.openapi.schemas import OpenApiSchema

from taskbench import backends
from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.harness.processes.envs import ensure_env
from taskbench.service.app import create_app
from taskbench.settings import Settings
from tests.helpers import served

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


# -- the same over HTTP, against a real API process (arq's environment), with hostile bodies too --

#: what schemathesis never sends (its strings exclude lone surrogates: "cannot be encoded for the wire")
LONE_SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
CODECS = ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be")
HOSTILE = st.one_of(
    st.none(),  # schemathesis' own body
    st.tuples(st.just("escaped"), LONE_SURROGATES, st.integers(0, 1_000)),  # "\ud800" in the JSON text
    st.tuples(st.just("raw"), LONE_SURROGATES, st.integers(0, 1_000)),  # its UTF-8 form: not UTF-8
    st.tuples(st.just("codec"), st.sampled_from(CODECS)),
    st.tuples(st.just("bytes"), st.binary(min_size=1, max_size=64)),
)
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance]


def with_surrogate(body: Any, lone: str, pick: int) -> Any:
    """``body`` with ``lone`` put into one of its strings or keys (chosen by ``pick``), else added as a key."""
    places: list[tuple[Any, Any, bool]] = []  # (container, key or index, the key itself?)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                places.append((node, key, True))
                walk(value) if isinstance(value, dict | list) else places.append((node, key, False))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value) if isinstance(value, dict | list) else places.append((node, i, False))

    body = json.loads(json.dumps(body)) if isinstance(body, dict | list) else body
    walk(body)
    places = [p for p in places if p[2] or isinstance(p[0][p[1]], str)]
    if not places:
        return {lone: body} if not isinstance(body, str) else body[: pick % (len(body) + 1)] + lone
    node, key, is_key = places[pick % len(places)]
    if is_key:
        node[key + lone] = node.pop(key)
    else:
        node[key] = node[key][: pick % (len(node[key]) + 1)] + lone + node[key][pick % (len(node[key]) + 1):]
    return body


def hostile_body(body: Any, hostile: tuple[Any, ...]) -> tuple[bytes, int | None]:
    """The bytes to send instead of ``body``, and the status they must get once the route matched."""
    if isinstance(body, NotSet):
        body = {}
    try:
        json.dumps(body)
    except TypeError:  # a negative case's bytes (or a value holding some): as text
        body = str(body)
    kind = hostile[0]
    if kind == "escaped":  # json.dumps escapes it as \udXXX: valid UTF-8, JSON's grammar allows it
        return json.dumps(with_surrogate(body, hostile[1], hostile[2])).encode(), 422
    if kind == "raw":
        text = json.dumps(with_surrogate(body, hostile[1], hostile[2]), ensure_ascii=False)
        return text.encode("utf-8", "surrogatepass"), 400
    if kind == "codec":  # any JSON text has an ASCII character: a NUL beside it, or a byte order mark
        return json.dumps(body, ensure_ascii=False).encode(hostile[1]), 400
    return hostile[1], None  # random bytes: anything but a 5xx


@pytest.fixture
def live_schema(tmp_path: Path, run_id: str) -> Iterator[OpenApiSchema]:
    redis_server = EmbeddedRedis(tmp_path / "redis" / "redis.log")  # arq's keys stay in a private server
    redis_server.start(dict(os.environ))
    env = {"TASKBENCH_BACKEND": "arq", "TASKBENCH_REDIS_URL": redis_server.url, "TASKBENCH_RUN_ID": run_id}
    try:
        with served(tmp_path, env, python=str(ensure_env(backends.info("arq").extra, quiet=True))) as port:
            yield schemathesis.openapi.from_url(f"http://127.0.0.1:{port}/openapi.json", config=CONFIG)
    finally:
        redis_server.stop()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_input_breaks_the_api_over_http(live_schema: OpenApiSchema, mode: GenerationMode) -> None:
    """schemathesis' requests, and the same with a lone surrogate in a string or a key, in the wrong
    encoding (UTF-16 or UTF-32, with or without a byte order mark, UTF-8's encoded surrogates) or random
    bytes instead of the body: never a 5xx, every answer as documented, the body refused as it must be."""
    operation = next(result.ok() for result in live_schema.get_all_operations()
                     if result.ok().path == "/api/v1/incr/{kind}/{mode}/{backend}")
    session = requests.Session()

    @hypothesis.seed(13)
    @hypothesis.settings(max_examples=150, deadline=None, database=None, derandomize=False,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode), hostile=HOSTILE)
    def check(case: schemathesis.Case, hostile: tuple[Any, ...] | None) -> None:
        if hostile is None:
            case.call_and_validate(session=session)
            return
        raw, due = hostile_body(case.body, hostile)
        response = case.call(session=session, data=raw, headers={"Content-Type": "application/json"})
        case.validate_response(response, checks=CHECKS)
        assert response.status_code < 500, response.text
        if due is not None and response.status_code not in (404, 413):  # a path made up; UTF-32's size
            assert response.status_code == due, (hostile, raw[:80], response.status_code, response.text)
            assert response.json()["detail"], response.text

    try:
        check()
    finally:
        session.close()
