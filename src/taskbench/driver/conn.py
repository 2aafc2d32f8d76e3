"""One keep-alive HTTP/1.1 client connection as an asyncio Protocol.

Parsing is deliberately minimal: status line, ``Content-Length``,
``Transfer-Encoding: chunked``, ``Connection: close`` and read-until-EOF bodies.
Header names are matched on a lower-cased copy of the header block, which is
far cheaper than building a header dict for every response.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, cast

_MAX_HEAD = 64 * 1024

# Parser states.
_HEAD, _BODY, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER, _EOF = range(6)


class Owner(Protocol):
    """Callbacks a connection reports to (the per-process engine)."""

    def on_response(self, conn: Conn, status: int) -> None: ...
    def on_failure(self, conn: Conn, kind: str) -> None: ...
    def on_lost(self, conn: Conn) -> None: ...


def _header(head: bytes, name: bytes) -> bytes | None:
    """Value of header ``name`` (lower-case, with leading CRLF and colon) in ``head``."""
    i = head.find(name)
    if i < 0:
        return None
    j = head.find(b"\r\n", i + len(name))
    return head[i + len(name) : j if j >= 0 else len(head)].strip()


class Conn(asyncio.Protocol):
    """Client side of one connection; at most one request in flight (no pipelining)."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.state = _HEAD
        self.status = 0
        self.remaining = 0
        self.close_after = False
        self.closed = False
        # The request in flight: task id, latency start, deadline (perf_counter).
        self.task_id: str | None = None
        self.t_start = 0.0
        self.deadline = 0.0
        #: the stage of a rate schedule the request in flight belongs to (its intended send's; -1: none)
        self.stage = -1
        self.done: asyncio.Future[None] | None = None

    # -- asyncio.Protocol ------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, hence the cast.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.task_id is not None:
            if self.state == _EOF:
                # Body delimited by connection close: this EOF completes it.
                self.close_after = True
                self.owner.on_response(self, self.status)
            else:
                self.owner.on_failure(self, "reset")
            self.task_id = None
        self.owner.on_lost(self)
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def eof_received(self) -> bool | None:
        return None  # let the transport close; connection_lost does the accounting

    def data_received(self, data: bytes) -> None:
        if self.task_id is None:
            # Unsolicited bytes (e.g. a 408 before an idle close): drop the connection.
            self.abort()
            return
        buf = self.buf
        buf += data
        try:
            self._parse(buf)
        except (ValueError, IndexError):
            self.fail("protocol")

    # -- driver side -----------------------------------------------------------
    def send(self, task_id: str, data: bytes, t_start: float, deadline: float) -> None:
        """Write one pre-encoded request; ``t_start`` is where latency counts from."""
        self.task_id = task_id
        self.t_start = t_start
        self.deadline = deadline
        self.state = _HEAD
        assert self.transport is not None
        self.transport.write(data)

    def fail(self, kind: str) -> None:
        """Give up on the request in flight (timeout, bad response) and drop the link."""
        if self.task_id is not None:
            self.owner.on_failure(self, kind)
            self.task_id = None
        self.abort()

    def close(self) -> None:
        """Graceful close; ``connection_lost`` follows."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.closed = True
            self.transport.abort()

    # -- parsing ---------------------------------------------------------------
    def _finish(self) -> None:
        self.buf.clear()
        self.state = _HEAD
        self.owner.on_response(self, self.status)  # may send the next request

    def _parse(self, buf: bytearray) -> None:
        while True:
            state = self.state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > _MAX_HEAD:
                        raise ValueError("response head too large")
                    return
                head = bytes(buf[: end + 2]).lower()
                del buf[: end + 4]
                if not head.startswith(b"http/1."):
                    raise ValueError("not an HTTP/1.x response")
                status = int(head[9:12])
                if status < 200:
                    continue  # interim 1xx response; the real one follows
                self.status = status
                conn = _header(head, b"\r\nconnection:")
                if head[7:8] == b"0":
                    self.close_after = conn is None or b"keep-alive" not in conn
                else:
                    self.close_after = conn is not None and b"close" in conn
                te = _header(head, b"\r\ntransfer-encoding:")
                if status in (204, 304):
                    self.remaining = 0
                    self.state = _BODY
                elif te is not None and b"chunked" in te:
                    self.state = _CHUNK_SIZE
                else:
                    cl = _header(head, b"\r\ncontent-length:")
                    if cl is not None:
                        self.remaining = int(cl)
                        self.state = _BODY
                    else:
                        self.state = _EOF
            elif state == _BODY:
                if len(buf) >= self.remaining:
                    self._finish()
                    return
                self.remaining -= len(buf)
                buf.clear()
                return
            elif state == _CHUNK_SIZE:
                j = buf.find(b"\r\n")
                if j < 0:
                    return
                size = int(bytes(buf[:j]).split(b";", 1)[0], 16)
                del buf[: j + 2]
                if size == 0:
                    self.state = _TRAILER
                else:
                    self.remaining = size + 2  # data plus its CRLF
                    self.state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                n = len(buf)
                if n < self.remaining:
                    # Keep a possible partial trailing CRLF out of the count simply
                    # by consuming what we have.
                    self.remaining -= n
                    buf.clear()
                    return
                del buf[: self.remaining]
                self.state = _CHUNK_SIZE
            elif state == _TRAILER:
                j = buf.find(b"\r\n")
                if j < 0:
                    return
                del buf[: j + 2]
                if j == 0:
                    self._finish()
                    return
            else:  # _EOF: body runs until the server closes
                buf.clear()
                return
