"""Response parsing of Conn, fed byte by byte through a fake transport."""

from __future__ import annotations

import asyncio

import pytest

from taskbench.driver.conn import Conn


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def on_response(self, conn: Conn, status: int) -> None:
        self.events.append(("response", status))
        conn.task_id = None

    def on_failure(self, conn: Conn, kind: str) -> None:
        self.events.append(("failure", kind))
        conn.task_id = None

    def on_lost(self, conn: Conn) -> None:
        self.events.append(("lost", None))


def _conn() -> tuple[Conn, Recorder, FakeTransport]:
    rec = Recorder()
    conn = Conn(rec)
    tr = FakeTransport()
    conn.connection_made(tr)  # type: ignore[arg-type]
    conn.send("t-0", b"POST / HTTP/1.1\r\n\r\n", 0.0, 1e9)
    return conn, rec, tr


def _feed(conn: Conn, data: bytes, step: int) -> None:
    for i in range(0, len(data), step):
        conn.data_received(data[i : i + step])


CASES = [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, False),
    (b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n", 201, False),
    (b"HTTP/1.1 500 Oops\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbad", 500, True),
    (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n",
        200,
        False,
    ),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok", 202, False),
    (b"HTTP/1.1 204 No Content\r\n\r\n", 204, False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, True),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", 200, False),
]


@pytest.mark.parametrize("step", [1, 3, 1000])
@pytest.mark.parametrize(("raw", "status", "close"), CASES)
def test_parses_fragmented_responses(raw: bytes, status: int, close: bool, step: int) -> None:
    conn, rec, _ = _conn()
    _feed(conn, raw, step)
    assert rec.events == [("response", status)]
    assert conn.close_after is close


def test_body_until_eof_completes_on_close() -> None:
    conn, rec, _ = _conn()
    _feed(conn, b"HTTP/1.0 200 OK\r\n\r\nsome body", 4)
    assert rec.events == []
    conn.connection_lost(None)
    assert rec.events == [("response", 200), ("lost", None)]


def test_garbage_is_a_protocol_error() -> None:
    conn, rec, tr = _conn()
    conn.data_received(b"SSH-2.0-OpenSSH\r\n\r\n")
    assert rec.events == [("failure", "protocol")]
    assert tr.closed


def test_bad_chunk_size_is_a_protocol_error() -> None:
    conn, rec, _ = _conn()
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    assert rec.events == [("failure", "protocol")]


def test_reset_mid_response() -> None:
    conn, rec, _ = _conn()
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    conn.connection_lost(ConnectionResetError())
    assert rec.events == [("failure", "reset"), ("lost", None)]


def test_unsolicited_data_drops_connection() -> None:
    rec = Recorder()
    conn = Conn(rec)
    tr = FakeTransport()
    conn.connection_made(tr)  # type: ignore[arg-type]
    conn.data_received(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    assert tr.closed
    assert rec.events == []


def test_done_future_resolves_on_lost() -> None:
    async def main() -> None:
        conn, _, _ = _conn()
        conn.done = asyncio.get_running_loop().create_future()
        conn.connection_lost(None)
        assert conn.done.done()

    asyncio.run(main())
