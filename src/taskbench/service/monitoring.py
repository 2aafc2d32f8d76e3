"""The API's metrics: HTTP request metrics (a pure-ASGI middleware) and ``GET /metrics``."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from taskbench.service.limits import PASS, BodySizeLimit, declared, enforce

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: the ``handler`` label of a request no route matched: every such request is counted under this one
#: value, however many paths a client makes up (bounded labels)
UNMATCHED = "none"
#: the ``method`` label of a method outside this set: a client chooses the method, the labels stay bounded
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
OTHER_METHOD = "other"
#: seconds: the buckets of ``http_request_duration_highr_seconds`` (prometheus-fastapi-instrumentator's,
#: whose metric names the Grafana dashboard and earlier results use)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30,
                   60)
EXCLUDED = frozenset({"/metrics", "/health"})


class HttpMetrics:
    """``http_requests_total`` (method, status, handler) and ``http_request_duration_highr_seconds``, and
    the request body limit (``limits.py``) in the same layer.

    The same metrics prometheus-fastapi-instrumentator's defaults give, at a fraction of its cost per
    request: the handler is the template of the route that served the request, which the router leaves
    in ``scope["route"]``, where the instrumentator matched every route a second time; the label
    children are looked up once per label set; nothing else is built per request. The body limit is
    checked here rather than in a middleware of its own: every layer is a coroutine frame that each of
    a request's awaits (the body, every round trip to the broker) passes through again.
    """

    def __init__(self, app: ASGIApp, requests: Any, latency: Any, max_bytes: int) -> None:
        self.app = app
        self._requests = requests
        self._latency = latency
        self.max_bytes = max_bytes
        self._children: dict[tuple[str, int, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verdict = declared(scope["headers"], self.max_bytes)
        if scope["path"] in EXCLUDED:
            await enforce(self.app, self.max_bytes, verdict, scope, receive, send)
            return
        status = 500  # what the client gets when the app raises before answering

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            if verdict == PASS:  # the usual request: straight on, no frame of the limit's own
                await self.app(scope, receive, send_status)
            else:
                await enforce(self.app, self.max_bytes, verdict, scope, receive, send_status)
        finally:
            self._latency.observe(time.perf_counter() - started)
            route = scope.get("route")
            handler = getattr(route, "path", None) or UNMATCHED
            method = scope["method"] if scope["method"] in METHODS else OTHER_METHOD
            key = (method, status, handler)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._requests.labels(method=method, status=str(status),
                                                                     handler=handler)
            child.inc()


def instrument(app: FastAPI, *, http: bool = True, max_bytes: int) -> None:
    """``GET /metrics`` with the task and enqueue metrics, and (``http``) the HTTP request metrics; the
    request body limit of ``max_bytes`` in the metrics' middleware, or in one of its own without them.

    In multiprocess mode (``taskbench serve``) the HTTP metrics land in the same directory as the task
    and enqueue metrics, so ``/metrics`` on any uvicorn worker returns the API's totals; an app built
    in-process keeps them on its own registry.
    """
    from fastapi import Response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

    from taskbench.metrics import ENV, exposition_registry

    http_registry = CollectorRegistry()  # never the global default: two apps in a process must not clash
    if http:
        requests = Counter("http_requests_total", "Total number of requests by method, status and handler.",
                           ("method", "status", "handler"), registry=http_registry)
        latency = Histogram("http_request_duration_highr_seconds", "Latency of every request, no labels.",
                            buckets=LATENCY_BUCKETS, registry=http_registry)
        app.add_middleware(HttpMetrics, requests=requests, latency=latency, max_bytes=max_bytes)
    else:
        app.add_middleware(BodySizeLimit, max_bytes=max_bytes)

    # response_model=None: the annotation names a class imported here, which FastAPI cannot resolve from the
    # module; pydantic 2.9 (the pinned environment article-000) fails on it, later versions let it pass
    @app.get("/metrics", include_in_schema=False, response_model=None)
    def metrics() -> Response:
        # a fresh multiprocess collector per scrape, as prometheus_client asks
        body = generate_latest(exposition_registry())
        if not os.environ.get(ENV):
            body += generate_latest(http_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)
