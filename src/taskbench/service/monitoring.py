"""The API's metrics: HTTP request metrics (a pure-ASGI middleware) and ``GET /metrics``."""

from __future__ import annotations

import math
import os
import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

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
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
                   7.5, 10.0, 30.0, 60.0)
EXCLUDED = frozenset({"/metrics", "/health"})
REQUESTS_HELP = "Total number of requests by method, status and handler."
LATENCY_HELP = "Latency of every request, no labels."


class Tally:
    """``http_requests_total`` and ``http_request_duration_highr_seconds`` kept as plain numbers, read by
    a collector at scrape time: for an API that runs one process (one uvicorn worker).

    prometheus_client's metrics take a lock for every increment and walk the buckets per observation;
    the request path here only adds to a dict entry and to one bucket found by bisection. Every
    increment happens on the API's event loop; a scrape (``/metrics`` runs in the thread pool) copies
    the dict in one step under the GIL.
    """

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self._requests: dict[tuple[str, int, str], int] = {}
        self._buckets = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is +Inf
        self._sum = 0.0

    def record(self, key: tuple[str, int, str], seconds: float) -> None:
        requests = self._requests
        requests[key] = requests.get(key, 0) + 1
        self._buckets[bisect_left(self._bounds, seconds)] += 1  # le is inclusive, as Prometheus has it
        self._sum += seconds

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        counter = CounterMetricFamily("http_requests", REQUESTS_HELP, labels=("method", "status", "handler"))
        for (method, status, handler), count in dict(self._requests).items():
            counter.add_metric([method, str(status), handler], count)
        yield counter
        buckets, total, cumulative = list(self._buckets), self._sum, 0
        pairs = []
        for bound, count in zip((*self._bounds, math.inf), buckets, strict=True):
            cumulative += count
            pairs.append(("+Inf" if math.isinf(bound) else repr(float(bound)), cumulative))  # as Histogram
        histogram = HistogramMetricFamily("http_request_duration_highr_seconds", LATENCY_HELP)
        histogram.add_metric([], pairs, sum_value=total)
        yield histogram


class _PrometheusMetrics:
    """The same two metrics as prometheus_client objects: in multiprocess mode (``serve --workers`` > 1),
    where each scrape adds up the workers' mmap-backed values."""

    def __init__(self, requests: Any, latency: Any) -> None:
        self._requests = requests
        self._latency = latency
        self._children: dict[tuple[str, int, str], Any] = {}

    def record(self, key: tuple[str, int, str], seconds: float) -> None:
        self._latency.observe(seconds)
        child = self._children.get(key)
        if child is None:
            method, status, handler = key
            child = self._children[key] = self._requests.labels(method=method, status=str(status), handler=handler)
        child.inc()


class HttpMetrics:
    """``http_requests_total`` (method, status, handler) and ``http_request_duration_highr_seconds``.

    The same metrics prometheus-fastapi-instrumentator's defaults give, at a fraction of its cost per
    request: the handler is the template of the route that served the request, which the router leaves
    in ``scope["route"]``, where the instrumentator matched every route a second time; nothing else is
    built per request. ``metrics`` keeps the numbers (:class:`Tally` in one process).
    """

    def __init__(self, app: ASGIApp, metrics: Tally | _PrometheusMetrics) -> None:
        self.app = app
        self._record = metrics.record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXCLUDED:
            await self.app(scope, receive, send)
            return
        status = 500  # what the client gets when the app raises before answering

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            method = scope["method"]
            self._record((method if method in METHODS else OTHER_METHOD, status,
                          getattr(route, "path", None) or UNMATCHED), time.perf_counter() - started)


def instrument(app: FastAPI, *, http: bool = True) -> None:
    """``GET /metrics`` with the task and enqueue metrics, and (``http``) the HTTP request metrics.

    In multiprocess mode (``taskbench serve``) the HTTP metrics land in the same directory as the task
    and enqueue metrics, so ``/metrics`` on any uvicorn worker returns the API's totals; an app built
    in-process keeps them on its own registry.
    """
    from fastapi import Response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

    from taskbench.metrics import ENV, exposition_registry

    http_registry = CollectorRegistry()  # never the global default: two apps in a process must not clash
    if http:
        numbers: Tally | _PrometheusMetrics
        if os.environ.get(ENV):  # several uvicorn workers: their values in mmap files, added up per scrape
            numbers = _PrometheusMetrics(
                Counter("http_requests_total", REQUESTS_HELP, ("method", "status", "handler"), registry=http_registry),
                Histogram("http_request_duration_highr_seconds", LATENCY_HELP, buckets=LATENCY_BUCKETS,
                          registry=http_registry))
        else:
            numbers = Tally(LATENCY_BUCKETS)
            http_registry.register(numbers)
        app.add_middleware(HttpMetrics, metrics=numbers)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        # a fresh multiprocess collector per scrape, as prometheus_client asks
        body = generate_latest(exposition_registry())
        if not os.environ.get(ENV):
            body += generate_latest(http_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)
