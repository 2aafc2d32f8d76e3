"""What one client can hold of the API, over real HTTP (service/server.py): a request head over the
limit gets 431 however it arrives and costs the API no memory, as do trailers that never end (413);
connections over the cap get 503;
requests pipelined past the bound get 503 after the answers before them; a body that stalls gets 408;
an answer the client does not read is dropped with its connection. Each time the API keeps answering
everyone else. One server for the module, with small bounds; every test closes what it opened."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path

import psutil
import pytest
import redis

from taskbench.ledger import Ledger
from taskbench.wait import wait_until
from tests.helpers import request, served

URL = "/api/v1/incr/io/simple/background"
MAX_CONNECTIONS = 16


@pytest.fixture
def run_id(module_run_id: str) -> str:
    """The module's server writes under one run id (tests/service/conftest.py)."""
    return module_run_id


@pytest.fixture(scope="module")
def api_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("api")


@pytest.fixture(scope="module")
def api(api_dir: Path, redis_url: str, module_run_id: str) -> Iterator[int]:
    env = {"TASKBENCH_BACKEND": "background", "TASKBENCH_REDIS_URL": redis_url, "TASKBENCH_RUN_ID": module_run_id,
           "TASKBENCH_MAX_CONNECTIONS": str(MAX_CONNECTIONS), "TASKBENCH_BODY_TIMEOUT": "1",
           "TASKBENCH_WRITE_TIMEOUT": "1"}
    with served(api_dir, env) as port:
        yield port


def _api_process(port: int) -> psutil.Process:
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "serve" in cmdline and "--port" in cmdline and str(port) in cmdline:
            return proc
    raise AssertionError(f"no API process on port {port}")


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (or 10 s of silence)."""
    data = b""
    with suppress(OSError):
        while chunk := sock.recv(65_536):
            data += chunk
    return data


def _head(size: int) -> bytes:
    """A request whose request line and headers are about ``size`` bytes, ending in its blank line."""
    start = f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n".encode()
    pad = size - len(start) - len("X-Pad: \r\n\r\n")
    return start + b"X-Pad: " + b"a" * pad + b"\r\n\r\n"


def _executed(client: redis.Redis, run_id: str, n: int) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    wait_until(lambda: ledger.executed_count(client) >= n, 10, what=f"{n} executed task(s)")


@pytest.mark.parametrize(("size", "write", "status"), [
    (15_000, 15_000, b"202"), (15_000, 1_000, b"202"),  # within 16 KiB, at once or a KiB at a time
    (17_000, 17_000, b"431"), (17_000, 1_000, b"431"),  # beyond it, either way
    (300_000, 300_000, b"431"),  # more than one read of the server's
])
def test_a_head_over_the_limit_gets_431(api: int, client: redis.Redis, run_id: str, size: int, write: int,
                                        status: bytes) -> None:
    data = _head(size) + b"{}"
    with _connect(api) as sock:
        for start in range(0, len(data), write):
            with suppress(OSError):  # the server may answer and close before the end
                sock.sendall(data[start:start + write])
        if status == b"431":
            with suppress(OSError):  # closed already
                sock.shutdown(socket.SHUT_WR)
            answer = _answer(sock)
        else:
            answer = sock.recv(65_536)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    if status == b"431":
        assert b"request line and headers larger than 16384 bytes" in answer
        assert b"connection: close" in answer
    else:
        _executed(client, run_id, 1)


def test_a_header_that_never_ends_costs_no_memory(api: int, client: redis.Redis, run_id: str) -> None:
    """The issue's flood: 1 MB writes of one header that never ends, on several connections at once
    (each was read until the header deadline, ~110 MB, and two made valid requests time out)."""
    proc = _api_process(api)
    before = proc.memory_info().rss
    refused: list[bytes] = []

    def flood() -> None:
        with _connect(api) as sock:
            sock.sendall(f"POST {URL} HTTP/1.1\r\nHost: x\r\nX-Big: ".encode())
            chunk = b"a" * (1 << 20)
            with suppress(OSError):
                for _ in range(64):  # 64 MB at most; refused after the first
                    sock.sendall(chunk)
            refused.append(_answer(sock)[:64])

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for thread in threads:
        thread.start()
    accepted = 0
    while any(t.is_alive() for t in threads) and accepted < 200:
        assert request(api, "POST", URL, "{}")[0] == 202  # everyone else is served meanwhile
        accepted += 1
    for thread in threads:
        thread.join(timeout=60)
    grown = proc.memory_info().rss - before
    assert all(r.startswith(b"HTTP/1.1 431") for r in refused) and len(refused) == 4, refused
    assert grown < 32 << 20, f"the API grew by {grown >> 20} MB"
    _executed(client, run_id, accepted)


def test_trailers_that_never_end_get_413(api: int) -> None:
    """A chunked body's trailer section is headers again, kept field by field by httptools: small
    fields sent without end took the API to 2.8 GB in 6 s. What a request sends after its head besides
    its body's bytes is bounded as it is read (the framing of any chunking, a head's worth of trailers)."""
    proc = _api_process(api)
    before = proc.memory_info().rss
    with _connect(api) as sock:
        sock.sendall(f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n".encode())
        fields = b"a:b\r\n" * 200_000  # 1 MB of trailer fields a write
        with suppress(OSError):  # refused after the first
            for _ in range(32):
                sock.sendall(fields)
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"chunk framing and trailers larger than" in answer
    grown = proc.memory_info().rss - before
    assert grown < 32 << 20, f"the API grew by {grown >> 20} MB"


def test_a_body_in_one_byte_chunks_is_accepted(api: int, client: redis.Redis, run_id: str) -> None:
    body = b'{"task_id": "one-byte-chunks", "value": 1}' + b" " * 8_000  # JSON allows the spaces
    chunks = b"".join(b"1\r\n" + body[i:i + 1] + b"\r\n" for i in range(len(body)))
    with _connect(api) as sock:
        sock.sendall(f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode() + chunks + b"0\r\n\r\n")
        answer = sock.recv(65_536)
    assert answer.startswith(b"HTTP/1.1 202"), answer[:300]
    _executed(client, run_id, 1)


def test_connections_over_the_cap_get_503(api: int, client: redis.Redis, run_id: str) -> None:
    with ExitStack() as held:
        socks = [held.enter_context(_connect(api)) for _ in range(MAX_CONNECTIONS)]
        socks[-1].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert socks[-1].recv(65_536).startswith(b"HTTP/1.1 200")  # all of them accepted by now
        with _connect(api) as one_more:
            answer = _answer(one_more)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert f"holds {MAX_CONNECTIONS} connections, its limit".encode() in answer
    # the held ones closed: the API serves again
    wait_until(lambda: request(api, "POST", URL, "{}")[0] == 202, 10, what="a 202 once the connections closed")
    wait_until(lambda: Ledger(f"taskbench:{run_id}:").executed_count(client) >= 1, 10, what="the task")


def test_pipelined_requests_past_the_bound_get_503_after_the_answers_before_them(api: int) -> None:
    with _connect(api) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 100)
        answer = _answer(sock)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)
    # the one answered first, the 32 queued behind it, then the refusal and the close
    assert statuses == [b"200"] * 33 + [b"503"], statuses
    assert b"more than 32 requests pipelined on one connection" in answer


def test_a_body_that_stalls_gets_408(api: int, client: redis.Redis, run_id: str) -> None:
    with _connect(api) as sock:
        sock.sendall(f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{".encode())  # 99 bytes owed, never sent
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"not complete 1 s after its headers" in answer
    assert request(api, "POST", URL, "{}")[0] == 202
    _executed(client, run_id, 1)


def test_a_client_that_reads_nothing_is_dropped(api: int) -> None:
    """Requests sent without reading an answer: once the server's writes are paused on it for the
    write timeout, the connection is dropped (it held an answer, and a task, for as long as it liked)."""
    with _connect(api) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        batch = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * 16
        dropped = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                sock.sendall(batch)
            except OSError:
                dropped = True
                break
            time.sleep(0.05)
    assert dropped, "the connection was still open after 60 s of answers it never read"
    assert request(api, "GET", "/health")[0] == 200


def test_a_client_does_not_write_the_log_at_its_pace(api: int, api_dir: Path) -> None:
    """uvicorn logs a warning for every request that is not HTTP and every upgrade it cannot do: a client
    could grow the API's log at its own pace. The same warning is logged at most every 10 s now. (The
    module's last test: it reads the whole log.)"""
    for _ in range(50):
        with _connect(api) as sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            assert _answer(sock).startswith(b"HTTP/1.1 400")
        with _connect(api) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: upgrade, close\r\nUpgrade: websocket\r\n\r\n")
            _answer(sock)
    log = (api_dir / "api.log").read_text()
    assert 1 <= log.count("Invalid HTTP request received.") <= 2, log[-2000:]
    assert 1 <= log.count("Unsupported upgrade request.") <= 2, log[-2000:]
    # and nothing the tests above did (a body dropped, a client that reads nothing) made a traceback
    assert "Traceback" not in log, log[-4000:]
