"""The reference API: validates a task, hands it to the backend, answers 202 once it is held."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Final

from fastapi import BackgroundTasks, Body, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic_core import to_json
from starlette.exceptions import HTTPException as StarletteHTTPException

from taskbench import backends, heap
from taskbench.backends.base import DuplicateTask
from taskbench.messages import USER_TASK, WORKLOADS, TaskMessage
from taskbench.service.broker import BrokerDownError
from taskbench.service.claims import KnownTask, known_task
from taskbench.service.messages import (
    HEALTH_RESPONSES,
    TASK_RESPONSES,
    Accepted,
    Health,
    TaskIn,
    Utf8Route,
    http_error,
    validation_error,
)
from taskbench.service.store import Store, StoreDep, open_store
from taskbench.settings import Settings

log = logging.getLogger("taskbench.service")


#: the task route's path parameters, as the OpenAPI schema shows them (the route reads them itself)
PATH_PARAMETERS: Final = [
    {"name": "kind", "in": "path", "required": True, "schema": {"type": "string", "title": "Kind"},
     "description": "io or cpu: the first part of the workload"},
    {"name": "mode", "in": "path", "required": True, "schema": {"type": "string", "title": "Mode"},
     "description": "simple, sync, thread or process: the second part of the workload"},
    {"name": "backend", "in": "path", "required": True, "schema": {"type": "string", "title": "Backend"},
     "description": "the backend this API serves"},
]
#: how long /health waits for the ledger's Redis and for the broker to answer
HEALTH_TIMEOUT = 1.0


async def health(store: StoreDep) -> Health:
    """200 while the run's Redis (the ledger) and the broker (a Redis PING, the backend's own check,
    or a TCP connect to RabbitMQ/NATS) answer within :data:`HEALTH_TIMEOUT`; 503 naming the one that
    did not."""
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT):
            await store.workloads.redis.ping()
    except TimeoutError:
        raise HTTPException(503, f"Redis did not answer a PING within {HEALTH_TIMEOUT:g} s") from None
    except Exception as exc:
        raise HTTPException(503, f"Redis PING failed: {type(exc).__name__}: {exc}") from None
    if store.backend_has_broker:
        try:
            await store.broker.check(HEALTH_TIMEOUT)
        except BrokerDownError as exc:
            raise HTTPException(503, f"broker: {exc}") from None
    return Health(status="ok", backend=store.settings.backend, run_id=store.settings.run_id, redis="ok",
                  broker=store.broker.name if store.backend_has_broker else "none",
                  durable=store.durability.durable, durability=store.durability.text)


def _unknown(store: Store, task_id: str) -> HTTPException:
    timeout = store.settings.enqueue_timeout
    store.enqueue_metrics.errors.inc()
    log.warning("enqueue of %s timed out after %g s", task_id, timeout)
    return HTTPException(503, f"enqueue of {task_id!r} did not finish within {timeout:g} s: the outcome is "
                              "unknown (the broker may hold the task and run it)")


async def claim_within(store: Store, task_id: str, deadline: float) -> bool:
    """Claim ``task_id`` for this request before ``deadline`` (the loop's clock); False when the API
    keeps no claims. Raises KnownTask (409) for a known id, HTTPException(503) when Redis fails."""
    claims = store.claims
    if claims is None:
        return False
    try:
        with store.deadlines.at(deadline):
            await claims.claim(task_id)
    except TimeoutError:
        await claims.unknown(task_id)  # the HSETNX may still land: a retry must not run it again
        raise _unknown(store, task_id) from None
    except KnownTask:
        raise
    except Exception as exc:
        store.enqueue_metrics.errors.inc()
        log.warning("claim of %s failed: %r", task_id, exc)
        raise HTTPException(503, f"the task id could not be claimed: {type(exc).__name__}: {exc}") from exc
    return True


async def enqueue_within(store: Store, task: TaskMessage, later: BackgroundTasks, deadline: float, *,
                         claimed: bool) -> None:
    """The backend's enqueue, bounded by ``deadline``; settles this request's claim when ``claimed``.

    Raises KnownTask (409) when the library refused a known id, HTTPException(503) when the enqueue
    fails (the claim is released: the id may be sent again) or times out. A timeout says the outcome
    is unknown: the broker may hold the task (and run it) although the client never hears so, which
    the audit counts as *unexpected*; the id is answered 409 "unknown" from then on.
    """
    claims = store.claims if claimed else None
    clock = time.perf_counter()
    try:
        with store.deadlines.at(deadline):  # asyncio.timeout_at's semantics, without a timer per request
            await store.producer.enqueue(task, later)
    except DuplicateTask:
        if claims is not None:  # ours by the claim, yet the library holds one: it is accepted
            claims.accepted(task.task_id)
        raise KnownTask(task.task_id, "accepted") from None
    except TimeoutError:
        if claims is not None:
            await claims.unknown(task.task_id)
        raise _unknown(store, task.task_id) from None
    except Exception as exc:
        store.enqueue_metrics.errors.inc()
        log.warning("enqueue of %s failed: %r", task.task_id, exc)
        if claims is not None:
            await claims.release(task.task_id)
        raise HTTPException(503, f"enqueue failed: {type(exc).__name__}: {exc}") from exc
    store.enqueue_metrics.duration.observe(time.perf_counter() - clock)
    if claims is not None:
        claims.accepted(task.task_id)


async def _enqueue_later(store: Store, task: TaskMessage, later: BackgroundTasks, claimed: bool) -> None:
    deadline = asyncio.get_running_loop().time() + store.settings.enqueue_timeout
    try:
        await enqueue_within(store, task, later, deadline, claimed=claimed)
    except (HTTPException, KnownTask) as exc:  # after the response: nobody to tell but the log
        log.warning("after-response enqueue of %s: %s", task.task_id, getattr(exc, "detail", exc))


class _NothingAfter(BackgroundTasks):
    """``later`` where nothing runs after the response (a worker backend, the enqueue awaited): one
    shared instance that refuses work, so that a backend that starts to use it fails at once."""

    def add_task(self, func: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("this API runs nothing after its responses (awaited enqueue, a worker backend)")


NOTHING_AFTER: Final = _NothingAfter()


async def incr(
    request: Request,
    body: Annotated[TaskIn | None, Body()] = None,
) -> Response:
    # the store straight from the lifespan state (the ASGI scope's ``state``), not through ``StoreDep``
    # nor ``request.state``: a dependency costs FastAPI tens of µs per request, ``request.state`` a
    # wrapper object, and this is the route under load (``/health`` keeps the dependency)
    store: Store = request.scope["state"]["store"]
    # the path's three parts read from the router's match: declared as parameters (documented in
    # PATH_PARAMETERS instead), FastAPI would validate three plain strings again per request
    path = request.scope["path_params"]
    kind, mode, backend = path["kind"], path["mode"], path["backend"]
    body = body or TaskIn()
    workload = f"{kind}/{mode}"
    if workload not in WORKLOADS and (workload != USER_TASK or store.settings.task is None):
        known = ", ".join((*WORKLOADS, USER_TASK) if store.settings.task else WORKLOADS)
        raise HTTPException(404, f"unknown workload {workload!r}; known: {known}")
    if backend != store.settings.backend:
        try:
            backends.info(backend)
        except backends.UnknownBackendError as exc:
            raise HTTPException(404, str(exc)) from None
        raise HTTPException(
            404, f"this API serves backend {store.settings.backend!r}, not {backend!r}"
        )
    task = TaskMessage(
        task_id=body.task_id,
        workload=workload,
        value=body.value,
        enqueued_at=body.enqueued_at if body.enqueued_at is not None else time.time(),
        payload=body.payload,
    )
    mode_name = store.settings.enqueue_mode
    # what runs after the response (the seed's BackgroundTask, or the background backend's task): ours,
    # not a FastAPI parameter, so that a response with nothing to run after it builds and awaits nothing
    later = BackgroundTasks() if store.runs_after_response else NOTHING_AFTER
    deadline = asyncio.get_running_loop().time() + store.settings.enqueue_timeout
    # no coroutine at all where the API keeps no claims (the library refuses a known id itself)
    claimed = store.claims is not None and await claim_within(store, task.task_id, deadline)
    if mode_name == "after-response":
        # The seed's BackgroundTask(enqueue): the client gets 2xx before the broker has the task.
        later.add_task(_enqueue_later, store, task, later, claimed)
    else:
        await enqueue_within(store, task, later, deadline, claimed=claimed)
    # the answer built here, as the route's ``Accepted`` model documents it: a response returned
    # directly skips FastAPI's validation and serialization of a model it would build from our own data,
    # and pydantic-core's encoder is faster than the json module's JSONResponse
    return Response(to_json({
        "status": "accepted", "task_id": task.task_id, "backend": store.settings.backend, "mode": mode_name,
        "durable": store.durability.durable}), status_code=202, media_type="application/json",
        background=later if later.tasks else None)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API for one backend; settings default to the TASKBENCH_* environment."""
    settings = settings or Settings()
    backends.info(settings.backend)  # an unknown backend fails at start, not per request

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with open_store(settings) as store:
            heap.freeze(settings.gc_freeze)  # start-up is over (taskbench/heap.py)
            yield {"store": store}

    # redirect_slashes off: Starlette's trailing-slash redirect echoes the Host header (a 307 to
    # http://evil.example/...); an unknown path is a plain 404
    app = FastAPI(title="taskbench reference service", lifespan=lifespan, redirect_slashes=False)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(KnownTask, known_task)
    # the routes on the app itself (FastAPI's path operations), not an included APIRouter: a request
    # to an included router is matched twice (the router's own layer, then its routes)
    app.add_api_route("/health", health, methods=["GET"], responses=HEALTH_RESPONSES)
    # its body JSON text in UTF-8, or a 400 (``json.loads`` would read UTF-16 and UTF-32 too)
    app.router.add_api_route("/api/v1/incr/{kind}/{mode}/{backend}", incr, methods=["POST"], status_code=202,
                             response_model=Accepted, responses=TASK_RESPONSES,
                             openapi_extra={"parameters": PATH_PARAMETERS}, route_class_override=Utf8Route)
    from taskbench.service.monitoring import instrument

    # the body limit, in the HTTP metrics' middleware when they are on (one layer fewer)
    instrument(app, http=settings.metrics, max_bytes=settings.max_body_bytes)
    return app
