"""Pure-ASGI HTTP basic auth for a library's dashboard bound beyond loopback (used by the backends' `run_dashboard`)."""

from __future__ import annotations

import base64
import hmac
from typing import Any

Scope = dict[str, Any]


class BasicAuth:
    """Answers 401 unless the request carries ``user:password``; compares in constant time."""

    def __init__(self, app: Any, credentials: str) -> None:
        self.app = app
        self.expected = b"Basic " + base64.b64encode(credentials.encode())

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"www-authenticate", b'Basic realm="taskbench"'),
                                        (b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"authentication required"})
                return
        await self.app(scope, receive, send)


async def serve_asgi(app: Any, host: str, port: int, auth: str | None) -> None:
    """Run an ASGI app with uvicorn until SIGINT/SIGTERM, behind basic auth when ``auth`` is given."""
    import uvicorn

    wrapped = BasicAuth(app, auth) if auth else app
    config = uvicorn.Config(wrapped, host=host, port=port, log_level="warning", access_log=False,
                            lifespan="off")
    await uvicorn.Server(config).serve()
