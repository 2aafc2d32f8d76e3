"""The reference API over real HTTP: routes, validation, bad input, and BackgroundTasks execution.

One server serves the whole module (starting uvicorn per test cost more than the tests); each test
still starts from an empty ledger: ``client`` deletes the run's keys after every test, and every
test waits for the tasks it caused before it ends.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import Result

from taskbench.ledger import Ledger
from taskbench.service.claims import FLUSH_INTERVAL
from taskbench.service.monitoring import UNMATCHED
from taskbench.wait import wait_until
from tests.helpers import assert_one_line_error, request, served

URL = "/api/v1/incr/io/simple/background"
USER_URL = "/api/v1/incr/user/task/background"


@pytest.fixture
def run_id(module_run_id: str) -> str:
    """The module's server writes under one run id (tests/service/conftest.py)."""
    return module_run_id


@pytest.fixture(scope="module")
def module_api(tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_run_id: str) -> Iterator[int]:
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": module_run_id, "TASKBENCH_MAX_BODY_BYTES": "4096"}
    with served(tmp_path_factory.mktemp("api"), env) as port:
        yield port


@pytest.fixture
def api(module_api: int, client: redis.Redis, run_id: str) -> Iterator[int]:
    assert Ledger(f"taskbench:{run_id}:").executed_count(client) == 0, "the previous test left tasks behind"
    yield module_api
    # the API writes accepted ids every 50 ms: let it finish before ``client`` deletes the run's keys,
    # or that write would bring back an id of this test for the next one
    claims = f"taskbench:{run_id}:ids"
    wait_until(lambda: not any(v.startswith(b"pending") for v in client.hvals(claims)), 10,
               what="the API to write the outcome of every claim")


def _wait_executed(client: redis.Redis, prefix: str, n: int) -> dict[str, int]:
    ledger = Ledger(prefix)
    wait_until(lambda: ledger.executed_count(client) >= n, 10, what=f"{n} executed task(s)")
    return ledger.read(client)[0]


def test_health(api: int, run_id: str) -> None:
    status, body = request(api, "GET", "/health")
    assert status == 200
    assert body == {"status": "ok", "backend": "background", "run_id": run_id, "redis": "ok", "broker": "none",
                    "durable": False, "durability": "no queue: tasks live in the API process"}


@pytest.mark.parametrize("workload", ["io/simple", "io/sync", "io/thread", "cpu/simple", "cpu/process"])
def test_accepts_and_executes_every_workload(api: int, client: redis.Redis, run_id: str, workload: str) -> None:
    body = json.dumps({"value": 3, "task_id": "abc-1", "enqueued_at": time.time()})
    status, answer = request(api, "POST", f"/api/v1/incr/{workload}/background", body)
    assert status == 202, answer
    assert answer == {"status": "accepted", "task_id": "abc-1", "backend": "background",
                      "mode": "awaited", "durable": False}
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"abc-1": 1}
    assert int(client.get(f"taskbench:{run_id}:counter") or 0) == 3


def test_empty_body_gets_defaults(api: int, client: redis.Redis, run_id: str) -> None:
    first = request(api, "POST", URL, None)
    second = request(api, "POST", URL, "{}")
    assert first[0] == second[0] == 202
    assert first[1]["task_id"] != second[1]["task_id"]
    assert len(_wait_executed(client, f"taskbench:{run_id}:", 2)) == 2


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        (URL, "{not json", 422, "JSON decode error"),
        (URL, '{"value": 0}', 422, "greater than or equal to 1"),
        (URL, '{"value": 10000000}', 422, "less than or equal to 1000000"),
        (URL, '{"value": "many"}', 422, "valid integer"),
        (URL, '{"task_id": "has space"}', 422, "pattern"),
        (URL, '{"enqueued_at": -1}', 422, "greater than or equal to 946684800"),
        # the list: non-finite or absurd times, and coercion, are refused, never a 5xx
        (URL, '{"enqueued_at": NaN}', 422, "finite number"),
        (URL, '{"enqueued_at": -Infinity}', 422, "finite number"),
        (URL, '{"enqueued_at": Infinity}', 422, "finite number"),
        (URL, '{"enqueued_at": 1e309}', 422, "finite number"),
        (URL, '{"enqueued_at": 1e12}', 422, "less than or equal to 4102444800"),
        (URL, '{"enqueued_at": false}', 422, "valid number"),
        (URL, '{"enqueued_at": "1700000000"}', 422, "valid number"),
        (URL, '{"value": true}', 422, "valid integer"),
        (URL, '{"value": "7"}', 422, "valid integer"),
        (URL, '{"value": 7.5}', 422, "valid integer"),
        (URL, '{"value": NaN}', 422, "valid integer"),
        (URL, '{"task_id": 7}', 422, "valid string"),
        # nested deeper than a payload may be, one level down: 400 naming the limit, before the parser recurses
        (URL, '[' * 2000 + ']' * 2000, 400, "deeper than 65 levels"),
        (USER_URL, '{"payload": {"a": ' + '[' * 1900 + ']' * 1900 + '}}', 400, "deeper than 65 levels"),
        (USER_URL, '{"payload": ' + '{"a":' * 680 + '1' + '}' * 680 + '}', 400, "deeper than 65 levels"),
        (USER_URL, '{"payload": {"a": ' + '[' * 65 + ']' * 65 + '}}', 400, "deeper than 65 levels"),
        (URL, '{"a": [{"b": [' + '{"c": [' * 40 + ']}' * 40 + ']}]}', 400, "deeper than 65 levels"),
        # a lone surrogate (JSON's "\ud800") in a string, a key, nested: echoed escaped, never a 500
        (URL, r'{"task_id": "\ud800"}', 422, "unicode string"),
        (URL, r'{"value": "\udfff"}', 422, "valid integer"),
        (URL, r'{"\ud800": 1}', 422, "unicode string"),
        (URL, r'{"value": {"\udbff": ["\udc00", NaN]}}', 422, '"\\\\udbff": ["\\\\udc00", "nan"]'),
        # not UTF-8: 400 with the reason (json.loads would have read UTF-16 and UTF-32)
        (URL, '{"task_id": "u16"}'.encode("utf-16"), 400, "UTF-16 (it begins with a byte order mark)"),
        (URL, '{"task_id": "u32"}'.encode("utf-32"), 400, "UTF-32 (it begins with a byte order mark)"),
        (URL, '{"task_id": "u16le"}'.encode("utf-16-le"), 400, "a NUL byte at offset 1"),
        (URL, '{"task_id": "u32be"}'.encode("utf-32-be"), 400, "a NUL byte at offset 0"),
        (URL, b'{"task_id": "\xed\xa0\x80"}', 400, "not UTF-8: byte 0xed at offset 13"),
        (URL, b'{"task_id": "\xe9"}', 400, "not UTF-8: byte 0xe9 at offset 13"),
        (URL + "/", "{}", 404, "Not Found"),
        (URL, '{"surprise": 1}', 422, "Extra inputs"),
        ("/api/v1/incr/io/process/background", "{}", 404, "unknown workload 'io/process'"),
        ("/api/v1/incr/gpu/simple/background", "{}", 404, "unknown workload 'gpu/simple'"),
        ("/api/v1/incr/io/simple/nosuch", "{}", 404, "unknown backend 'nosuch'"),
        ("/api/v1/incr/io/simple/arq", "{}", 404, "serves backend 'background', not 'arq'"),
    ],
)
def test_bad_input_gets_4xx_with_message(
    api: int, client: redis.Redis, run_id: str, path: str, body: str | bytes, status: int, message: str
) -> None:
    got, answer = request(api, "POST", path, body)
    assert got == status
    assert message in json.dumps(answer)
    # nothing ran: a good request sent after it is the only task that executes
    assert request(api, "POST", URL, '{"task_id": "after-bad"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"after-bad": 1}


def test_a_body_nested_to_the_limit_is_taken(api: int, client: redis.Redis, run_id: str) -> None:
    # the deepest payload `--payload` takes, one level down in the body; brackets in a string are text
    deepest = "[" * 63 + '"[[[[' + "[" * 100 + '"' + "]" * 63
    status, answer = request(api, "POST", URL, '{"task_id": "deepest", "payload": {"a": ' + deepest + "}}")
    assert status == 202, answer
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"deepest": 1}


def test_oversized_body_is_refused(api: int, client: redis.Redis, run_id: str) -> None:
    big = json.dumps({"value": 1, "task_id": "x" * 10, "pad": "y" * 10_000})
    status, answer = request(api, "POST", URL, big)
    assert status == 413
    assert "larger than 4096 bytes" in answer["detail"]
    # the server still works afterwards, and the refused body ran nothing
    assert request(api, "POST", URL, '{"task_id": "after-big"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"after-big": 1}


def test_after_response_mode(tmp_path: Path, redis_url: str, run_id: str, client: redis.Redis) -> None:
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_ENQUEUE_MODE": "after-response"}
    with served(tmp_path, env) as port:
        status, answer = request(port, "POST", URL, '{"task_id": "late-1"}')
        assert status == 202
        assert answer["mode"] == "after-response"
        assert answer["durable"] is False
        assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"late-1": 1}
        # the id is claimed before the 202, so a duplicate is refused although the enqueue comes later
        status, answer = request(port, "POST", URL, '{"task_id": "late-1"}')
        assert status == 409 and answer["first"] in ("pending", "accepted"), answer
        # accepted ids are written in batches every FLUSH_INTERVAL: once one has passed, it says accepted
        answers: list[tuple[int, Any]] = []

        def says_accepted() -> bool:
            answers.append(request(port, "POST", URL, '{"task_id": "late-1"}'))
            return answers[-1][1].get("first") == "accepted"

        wait_until(says_accepted, 10, what="the accepted batch's flush", interval=FLUSH_INTERVAL,
                   raise_on_timeout=False)
        assert answers[-1][0] == 409 and answers[-1][1]["first"] == "accepted", answers[-1]
        assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"late-1": 1}


def _known(port: int, task_id: str, value: int = 1) -> dict[str, Any]:
    status, answer = request(port, "POST", URL, json.dumps({"task_id": task_id, "value": value}))
    assert status == 409, answer
    return dict(answer)


def test_a_known_task_id_is_409_and_never_runs_again(api: int, client: redis.Redis, run_id: str) -> None:
    """The issue: the same id twice, the second body different, was 202 on every backend."""
    assert request(api, "POST", URL, '{"task_id": "twice", "value": 2}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"twice": 1}
    # the first's outcome is written after its 202 was sent: "pending" until then
    answer = wait_until(lambda: (a := _known(api, "twice", 5))["first"] == "accepted" and a, 10,
                        what="the first submission marked accepted")
    assert answer == {"detail": "task 'twice' was already submitted in this run; the first submission was "
                                "accepted: not enqueued again", "task_id": "twice", "first": "accepted"}
    assert request(api, "POST", URL, '{"task_id": "once"}')[0] == 202  # a new id is unaffected
    assert _wait_executed(client, f"taskbench:{run_id}:", 2) == {"twice": 1, "once": 1}
    assert int(client.get(f"taskbench:{run_id}:counter") or 0) == 2 + 1  # the second body never counted


def test_concurrent_duplicates_get_one_202(api: int, client: redis.Redis, run_id: str) -> None:
    body = '{"task_id": "racing"}'
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: request(api, "POST", URL, body), range(8)))
    statuses = sorted(status for status, _ in answers)
    assert statuses == [202] + [409] * 7, answers
    for status, answer in answers:
        if status == 409:
            assert answer["task_id"] == "racing" and answer["first"] in ("pending", "accepted"), answer
    assert request(api, "POST", URL, '{"task_id": "after-race"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 2) == {"racing": 1, "after-race": 1}


def test_a_claim_whose_outcome_was_never_written_reads_unknown(api: int, client: redis.Redis, run_id: str) -> None:
    """An API killed between its claim and its enqueue's outcome leaves ``pending <time>``: in flight
    while younger than the enqueue timeout (5 s) plus 2 s, then ``unknown``, never ``accepted``."""
    claims = f"taskbench:{run_id}:ids"
    client.hset(claims, mapping={"stale": f"pending {time.time() - 60:.3f}", "fresh": f"pending {time.time():.3f}",
                                 "timed-out": "unknown"})
    assert _known(api, "stale")["first"] == "unknown"
    assert _known(api, "fresh")["first"] == "pending"
    assert _known(api, "timed-out")["first"] == "unknown"
    client.hdel(claims, "stale", "fresh")
    assert request(api, "POST", URL, '{"task_id": "after-claims"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"after-claims": 1}


def test_idempotency_off_runs_every_submission(tmp_path: Path, redis_url: str, run_id: str,
                                               client: redis.Redis) -> None:
    """``--no-idempotency`` (to measure the claim's cost): the API checks nothing, as before the contract."""
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_IDEMPOTENCY": "false"}
    with served(tmp_path, env) as port:
        assert [request(port, "POST", URL, '{"task_id": "free"}')[0] for _ in range(2)] == [202, 202]
        ledger = Ledger(f"taskbench:{run_id}:")
        assert wait_until(lambda: ledger.read(client)[0].get("free") == 2, 10, what="two runs of one id")
        assert not client.exists(f"taskbench:{run_id}:ids")


def test_serve_with_unreachable_redis_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "taskbench", "serve", "--redis-url", "redis://127.0.0.1:1/0"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 2
    assert "cannot reach Redis at 127.0.0.1:1" in out.stderr
    assert "Traceback" not in out.stderr


def test_serve_with_unknown_backend(cli: Callable[..., Result]) -> None:
    assert_one_line_error(cli("serve", "--backend", "nope"), "unknown backend 'nope'")


def test_whole_float_value_is_an_integer(api: int, client: redis.Redis, run_id: str) -> None:
    status, answer = request(api, "POST", URL, json.dumps({"value": 7.0, "task_id": "w7",
                                                           "enqueued_at": 1_700_000_000}))
    assert status == 202, answer
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"w7": 1}
    assert int(client.get(f"taskbench:{run_id}:counter") or 0) == 7


def _chunked(port: int, path: str, total: int, chunk: int = 65_536) -> tuple[int, dict[str, Any]]:
    """POST ``total`` bytes with Transfer-Encoding: chunked (no Content-Length); the status and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        piece = f"{chunk:x}\r\n".encode() + b"7" * chunk + b"\r\n"
        with suppress(OSError):  # the server answers and closes long before the end
            for _ in range(total // chunk):
                sock.sendall(piece)
            sock.sendall(b"0\r\n\r\n")
        raw = b""
        with suppress(OSError):
            while block := sock.recv(65_536):
                raw += block
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_chunked_oversized_body_is_413(api: int, client: redis.Redis, run_id: str) -> None:
    status, answer = _chunked(api, URL, 10 * 1024 * 1024)
    assert status == 413
    assert answer == {"detail": "request body larger than 4096 bytes"}
    assert request(api, "POST", URL, '{"task_id": "after-chunked"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"after-chunked": 1}


def test_chunked_small_body_is_accepted(api: int, client: redis.Redis, run_id: str) -> None:
    with socket.create_connection(("127.0.0.1", api), timeout=10) as sock:
        body = b'{"task_id": "chunky"}'
        sock.sendall(f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode()
                     + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        raw = sock.makefile("rb").read()
    assert raw.split()[1] == b"202"
    assert b'"task_id":"chunky"' in raw
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"chunky": 1}


def test_no_redirect_echoes_the_host(api: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", api, timeout=10)
    try:
        conn.request("POST", "/api/v1/incr/io/simple/background/", body="{}",
                     headers={"Host": "evil.example", "Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    assert resp.status == 404
    assert resp.getheader("location") is None


def test_metric_labels_are_bounded(api: int, client: redis.Redis, run_id: str) -> None:
    for i in range(40):
        request(api, "POST", f"/made-up/{i}", "{}")
        request(api, "GET", f"/api/v1/incr/io/simple/background/{i}")
    assert request(api, "POST", URL, '{"task_id": "labelled"}')[0] == 202
    assert _wait_executed(client, f"taskbench:{run_id}:", 1) == {"labelled": 1}
    # a request is counted once its background task ran, after the response: wait for it
    def handlers() -> set[str]:
        status, text = request(api, "GET", "/metrics")
        assert status == 200
        return set(re.findall(r'^http_requests_total\{[^}]*handler="([^"]*)"', text, re.M))

    wait_until(lambda: len(handlers()) > 1, 10, what="the labelled request in /metrics")
    assert handlers() == {UNMATCHED, "/api/v1/incr/{kind}/{mode}/{backend}"}


def test_slow_header_connections_are_bounded(tmp_path: Path, redis_url: str, run_id: str,
                                             client: redis.Redis) -> None:
    """Slowloris: silent connections and headers trickled a byte at a time are closed at the header
    deadline; the API keeps answering everyone else meanwhile."""
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url,
           "TASKBENCH_RUN_ID": run_id, "TASKBENCH_HEADER_TIMEOUT": "1.5"}
    with served(tmp_path, env) as port:
        silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2)]
        slow = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
        for sock in slow:
            sock.sendall(f"POST {URL} HTTP/1.1\r\nHost: x\r\n".encode())
        start = time.monotonic()
        closed: dict[int, float] = {}
        header = b"X-Slow: " + b"a" * 100
        i = served_meanwhile = 0
        while len(closed) < 5 and time.monotonic() - start < 8:
            for n, sock in enumerate(slow):
                if n + 2 not in closed:
                    with suppress(OSError):
                        sock.sendall(header[i:i + 1])  # a byte at a time, never the end of the headers
            for n, sock in enumerate(silent + slow):
                if n in closed:
                    continue
                sock.settimeout(0.01)
                try:
                    if sock.recv(1024) == b"":
                        closed[n] = time.monotonic() - start
                except TimeoutError:
                    pass
                except OSError:
                    closed[n] = time.monotonic() - start
            assert request(port, "POST", URL, "{}")[0] == 202  # everyone else is served meanwhile
            i += 1
            served_meanwhile = i
            time.sleep(0.2)
        for sock in silent + slow:
            sock.close()
        assert len(closed) == 5, f"still open after 8 s: {sorted(set(range(5)) - set(closed))}"
        assert all(t >= 1.0 for t in closed.values()), closed  # not before the 1.5 s deadline; closed at all within 8 s
        assert len(_wait_executed(client, f"taskbench:{run_id}:", served_meanwhile)) == served_meanwhile
