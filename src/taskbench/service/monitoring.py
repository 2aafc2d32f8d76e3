"""The API's metrics: prometheus-fastapi-instrumentator's HTTP metrics and ``GET /metrics``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

#: the ``handler`` label of a request no route matched: the instrumentator groups every such request
#: under this one value (``should_group_untemplated``), however many paths a client makes up
UNMATCHED = "none"
#: seconds: the instrumentator's default buckets of ``http_request_duration_highr_seconds``
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30,
                   60)


def instrument(app: FastAPI, *, http: bool = True) -> None:
    """``GET /metrics`` with the task and enqueue metrics, and (``http``) the HTTP request metrics.

    The instrumentator's middleware is pure ASGI. In multiprocess mode (``taskbench serve``) its
    metrics land in the same directory as the task and enqueue metrics, so ``/metrics`` on any
    uvicorn worker returns the API's totals; an app built in-process keeps them on its own registry.
    """
    from fastapi import Response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_fastapi_instrumentator import Instrumentator
    from prometheus_fastapi_instrumentator import metrics as http_metrics

    from taskbench.metrics import ENV, exposition_registry

    http_registry = CollectorRegistry()  # never the global default: two apps in a process must not clash
    if http:
        Instrumentator(
            excluded_handlers=["^/metrics$", "^/health$"],
            should_group_status_codes=False,  # 202 vs 422 vs 503 is the point
            should_group_untemplated=True,  # bounded labels: a made-up path is not a label value
            registry=http_registry,
        ).add(
            # two of the instrumentator's five default metrics: the request count and the latency
            # histogram the Grafana dashboard reads. The request and response size summaries and the
            # second, per-handler latency histogram cost the API a tenth of its CPU per request in
            # multiprocess mode (an mmap write under a lock per sample) and nothing here reads them
            http_metrics.requests(registry=http_registry),
            http_metrics.latency(metric_name="http_request_duration_highr_seconds", should_include_handler=False,
                            should_include_method=False, should_include_status=False, buckets=LATENCY_BUCKETS,
                            registry=http_registry),
        ).instrument(app)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        # a fresh multiprocess collector per scrape, as prometheus_client asks
        body = generate_latest(exposition_registry())
        if not os.environ.get(ENV):
            body += generate_latest(http_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

