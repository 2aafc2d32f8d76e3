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


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > self.max_bytes:
                    await self._refuse(send)
                    return
                declared = value
            elif name == b"transfer-encoding":
                declared = None
                break
        if declared is not None and declared.isdigit():
            # the server frames the body by its Content-Length (the bytes after it are the next request):
            # within the limit as declared, it cannot grow past it, so it goes through unread and uncopied
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal whole
            if whole is not None:
                message, whole = whole, None
                return message
            return await receive()  # after the body: a disconnect, for whoever waits on one

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"detail": f"request body larger than {self.max_bytes} bytes"}
        ).encode()
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
