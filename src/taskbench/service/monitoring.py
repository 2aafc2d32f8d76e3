"""The API's metrics: prometheus-fastapi-instrumentator's HTTP metrics and ``GET /metrics``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

#: the ``handler`` label of a request no route matched: one value, however many paths are tried
UNMATCHED = "unmatched"


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
            registry=http_registry,
        ).instrument(app)
        _bound_handler_label(app)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        # a fresh multiprocess collector per scrape, as prometheus_client asks
        body = generate_latest(exposition_registry())
        if not os.environ.get(ENV):
            body += generate_latest(http_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)


def _bound_handler_label(app: FastAPI) -> None:
    """The ``handler`` label is a route template or :data:`UNMATCHED`, never a raw path.

    The instrumentator labels an unmatched request "none" or, configured otherwise, with its path:
    one label value per path a client makes up. Its middleware (the entry ``instrument`` just
    added) is swapped for a subclass that names every unmatched request the same.
    """
    from prometheus_fastapi_instrumentator.middleware import PrometheusInstrumentatorMiddleware
    from starlette.middleware import Middleware
    from starlette.requests import Request

    class Bounded(PrometheusInstrumentatorMiddleware):
        def _get_handler(self, request: Request) -> tuple[str, bool]:
            handler, templated = super()._get_handler(request)
            return (handler, True) if templated else (UNMATCHED, True)

    entry = app.user_middleware[0]
    added: Any = entry.cls
    if added is not PrometheusInstrumentatorMiddleware:
        raise RuntimeError("prometheus-fastapi-instrumentator no longer adds its middleware first")
    kwargs: dict[str, Any] = dict(entry.kwargs)
    app.user_middleware[0] = Middleware(Bounded, *entry.args, **kwargs)
