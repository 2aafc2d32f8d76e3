"""Pure ASGI middleware that refuses oversized request bodies before the app reads them.

A body whose ``Content-Length`` is within the limit goes through untouched (the server delivers no
more than it declares). Any other body (chunked) is read here, counting the bytes as they stream in,
and handed on only when it is complete and within the limit: a ``Content-Length`` over the limit and
a chunked body that grows past it get the same 413 with a JSON message. (Raising from a wrapped
``receive`` instead is not enough: FastAPI catches what its body parser raises and answers 400 "There
was an error parsing the body".)
Bodies are small here (16 KiB by default), so holding one in memory costs nothing.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: what :func:`declared` says of a request's headers
PASS, REFUSE, READ = 0, 1, 2


def declared(headers: list[tuple[bytes, bytes]], max_bytes: int) -> int:
    """PASS: a ``Content-Length`` within ``max_bytes`` (the server frames the body by it: the bytes after
    it are the next request, so it cannot grow past it); REFUSE: one over it; READ: anything else (a
    chunked body, or no length), to be read and counted by :func:`read_within`."""
    length = None
    for name, value in headers:
        if name == b"content-length":
            length = value
        elif name == b"transfer-encoding":
            return READ
    if length is None or not length.isdigit():
        return READ
    return PASS if int(length) <= max_bytes else REFUSE


async def read_within(receive: Receive, max_bytes: int) -> Message | bool | None:
    """Read a whole body, counting its bytes: the one ``http.request`` message that holds it, False once
    it grows past ``max_bytes``, None when the client went away (nothing to answer)."""
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > max_bytes:
            return False
        chunks.append(chunk)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}


def replaying(whole: Message, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body read already, then whatever comes (a disconnect)."""
    pending: Message | None = whole

    async def replay() -> Message:
        nonlocal pending
        if pending is not None:
            message, pending = pending, None
            return message
        return await receive()

    return replay


async def limited(app: ASGIApp, max_bytes: int, scope: Scope, receive: Receive, send: Send) -> None:
    """``app`` behind the limit, for a body :func:`declared` said to READ: read it, then refuse or replay."""
    whole = await read_within(receive, max_bytes)
    if whole is None:  # the client went away: nothing to answer
        return
    if whole is False:
        await refuse(send, max_bytes)
        return
    assert isinstance(whole, dict)
    await app(scope, replaying(whole, receive), send)


async def enforce(app: ASGIApp, max_bytes: int, verdict: int, scope: Scope, receive: Receive, send: Send) -> None:
    """``app`` behind the limit, as :func:`declared` judged the request (a caller on the hot path
    handles PASS itself: one coroutine frame fewer for every await of the request)."""
    if verdict == PASS:
        await app(scope, receive, send)
    elif verdict == REFUSE:
        await refuse(send, max_bytes)
    else:
        await limited(app, max_bytes, scope, receive, send)


async def refuse(send: Send, max_bytes: int) -> None:
    body = json.dumps({"detail": f"request body larger than {max_bytes} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """The limit alone, as a middleware (the API's HTTP metrics middleware applies it itself when on:
    one layer fewer for every request to pass through)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verdict = declared(scope["headers"], self.max_bytes)
        if verdict == PASS:
            await self.app(scope, receive, send)
        else:
            await enforce(self.app, self.max_bytes, verdict, scope, receive, send)
