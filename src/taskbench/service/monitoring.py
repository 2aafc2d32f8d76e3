"""The API's metrics: prometheus-fastapi-instrumentator's HTTP metrics and ``GET /metrics``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

#: the ``handler`` label of a request no route matched: the instrumentator groups every such request
#: under this one value (``should_group_untemplated``), however many paths a client makes up
UNMATCHED = "none"


def instrument(app: FastAPI, *, http: bool = True) -> None:
    """``GET /metrics`` with the task and enqueue metrics, and (``http``) the HTTP request metrics.

    The instrumentator's middleware is pure ASGI. In multiprocess mode (``taskbench serve``) its
    metrics land in the same directory as the task and enqueue metrics, so ``/metrics`` on any
    uvicorn worker returns the API's totals; an app built in-process keeps them on its own registry.
    """
    from fastapi import Response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_fastapi_instrumentator import Instrumentator

    from taskbench.metrics import ENV, exposition_registry

    http_registry = CollectorRegistry()  # never the global default: two apps in a process must not clash
    if http:
        Instrumentator(
            excluded_handlers=["^/metrics$", "^/health$"],
            should_group_status_codes=False,  # 202 vs 422 vs 503 is the point
            should_group_untemplated=True,  # bounded labels: a made-up path is not a label value
            registry=http_registry,
        ).instrument(app)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        # a fresh multiprocess collector per scrape, as prometheus_client asks
        body = generate_latest(exposition_registry())
        if not os.environ.get(ENV):
            body += generate_latest(http_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

