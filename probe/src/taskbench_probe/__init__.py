"""taskbench's probe: two lines in your service let ``taskbench run --target`` audit your tasks.

``taskbench run --target URL`` sends each request with a unique task reference (``<task id>@<send
time>``) in the ``X-Taskbench-Task`` header, or in a field of your payload where your ``--payload``
template puts ``{task_id}@{enqueued_at}``. Your code carries it to the task and the decorator records
the task's execution in taskbench's ledger::

    from taskbench_probe import recorded, task_ref

    @app.post("/orders")
    async def create(order: Order, request: Request) -> dict:
        await pool.enqueue_job("process", order.model_dump(), taskbench=task_ref(request))   # line 1
        return {"status": "queued"}

    @recorded                                                                           # line 2
    async def process(ctx: dict, order: dict) -> None: ...

The decorator takes the reference out of the ``taskbench`` keyword (your function never sees it) or,
with ``@recorded(field="request_id")``, reads it from that keyword or from that key (or attribute) of a
payload argument. It works on ``async def`` and plain ``def`` functions. A call without a reference (a
request that did not come from taskbench) runs as it would without the probe and records nothing.

What is recorded, and why this way: one Lua script (:data:`RECORD_EXECUTION`, the same text as
``taskbench.ledger.RECORD_EXECUTION``) increments the task's execution count and writes its enqueue,
start and finish times once the call ends, atomically: a worker killed mid-task leaves no record (the
task is *lost* unless your queue runs it again), a second execution is counted (*duplicated*), and a
call that raised is recorded with its exception type (*failed*) before the exception goes on to your
queue. The ledger is the Redis at ``TASKBENCH_LEDGER_URL`` (default ``redis://127.0.0.1:6379/0``), under
the keys of the taskbench run that sent the request (``taskbench:<run id>:ledger:*``, the run id being
the part of the task id before its first ``.``): a run deletes its own keys when it ends.

This package depends on a Redis client only (redis-py) and never imports taskbench.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import os
import re
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, ParamSpec, TypeVar, cast, overload

import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

__all__ = ["HEADER", "KEYWORD", "RECORD_EXECUTION", "TaskbenchMiddleware", "recorded", "task_ref"]

#: the request header taskbench sends the task reference in (matched without regard to case)
HEADER: Final = "x-taskbench-task"
#: the keyword argument the decorator takes the reference from (and removes before calling you)
KEYWORD: Final = "taskbench"
#: the ledger's Redis: the environment variable, and its default
LEDGER_ENV: Final = "TASKBENCH_LEDGER_URL"
DEFAULT_LEDGER_URL: Final = "redis://127.0.0.1:6379/0"
#: ``<run id>.<rest>@<unix time>``: the id as taskbench's API accepts one, the send time optional
_REF: Final = re.compile(r"^(?P<run>[A-Za-z0-9_:-]{1,50})\.(?P<rest>[A-Za-z0-9_.:-]{1,50})"
                         r"(?:@(?P<sent>\d{1,12}(?:\.\d{1,9})?))?$")
_TYPE_CHARS: Final = re.compile(r"[^A-Za-z0-9_.]")

#: one execution (the text of ``taskbench.ledger.RECORD_EXECUTION``; a test keeps them equal).
#: KEYS: count, times, cpu, failed hashes; ARGV: task id, times, CPU seconds or "", exception type or ""
RECORD_EXECUTION: Final = """
local runs = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], ARGV[3]) end
if ARGV[4] ~= '' then
  local before = redis.call('HGET', KEYS[4], ARGV[1])
  local failed = 1
  if before then failed = (tonumber(string.match(before, '^%d+')) or 0) + 1 end
  redis.call('HSET', KEYS[4], ARGV[1], failed .. ' ' .. ARGV[4])
end
return runs
"""
RECORD_EXECUTION_SHA: Final = hashlib.sha1(RECORD_EXECUTION.encode(), usedforsecurity=False).hexdigest()

P = ParamSpec("P")
R = TypeVar("R")

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("taskbench_task", default=None)


# -- line 1: the reference, from the request ---------------------------------------------------------------


def task_ref(request: Any = None) -> str | None:
    """The task reference taskbench sent with ``request`` (a Starlette/FastAPI ``Request``, any object
    with a ``headers`` mapping, a mapping of headers, or an ASGI scope); without an argument, the one
    :class:`TaskbenchMiddleware` saw on the request being served. None when there is none, or it is not
    one taskbench sends (the request is not taskbench's: nothing will be recorded)."""
    if request is None:
        return _current.get()
    value = _header(request)
    return value if value is not None and _REF.match(value) else None


def _header(request: Any) -> str | None:
    if isinstance(request, Mapping) and "type" in request and isinstance(request.get("headers"), list):
        for name, value in request["headers"]:  # an ASGI scope: (bytes, bytes) pairs
            if name.lower() == HEADER.encode():
                return str(value.decode("latin-1"))
        return None
    headers = getattr(request, "headers", request)
    if not isinstance(headers, Mapping):
        return None
    value = headers.get(HEADER)
    if value is None:  # a plain dict keeps the case it was given
        value = next((v for k, v in headers.items() if str(k).lower() == HEADER), None)
    return None if value is None else str(value)


class TaskbenchMiddleware:
    """Pure ASGI middleware: makes the request's task reference :func:`task_ref`'s answer (no argument)
    for the code that serves the request, background tasks included: ``app.add_middleware(...)``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        token = _current.set(task_ref(scope))
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)


# -- line 2: the decorator --------------------------------------------------------------------------------


@overload
def recorded(fn: Callable[P, R], /) -> Callable[..., R]: ...
@overload
def recorded(*, field: str | None = None) -> Callable[[Callable[P, R]], Callable[..., R]]: ...
def recorded(fn: Callable[P, R] | None = None, /, *, field: str | None = None) -> Any:
    """Record each call of the task function in taskbench's ledger (see the module's docstring).

    ``field``: also look for the reference under that keyword, or that key (attribute) of a payload
    argument. The reference in the ``taskbench`` keyword is always taken out before the call (so the
    wrapped function takes any arguments, as far as a type checker knows: that keyword too).
    """
    def wrap(func: Callable[P, R]) -> Callable[..., R]:
        wrapper = _async_wrapper(func, field) if inspect.iscoroutinefunction(func) else _sync_wrapper(func, field)
        return cast("Callable[..., R]", functools.wraps(func)(wrapper))

    return wrap(fn) if fn is not None else wrap


def _async_wrapper(func: Callable[..., Any], field: str | None) -> Callable[..., Awaitable[Any]]:
    async def run(*args: Any, **kwargs: Any) -> Any:
        ref = _take_ref(args, kwargs, field)
        if ref is None:
            return await func(*args, **kwargs)
        started = time.time()
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            if isinstance(exc, Exception):
                await _ledger.record(ref, started, time.time(), error=failure_name(exc))
            raise
        await _ledger.record(ref, started, time.time())
        return result

    return run


def _sync_wrapper(func: Callable[..., Any], field: str | None) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        ref = _take_ref(args, kwargs, field)
        if ref is None:
            return func(*args, **kwargs)
        started, cpu = time.time(), time.thread_time()
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            _ledger.record_sync(ref, started, time.time(), cpu_s=time.thread_time() - cpu, error=failure_name(exc))
            raise
        _ledger.record_sync(ref, started, time.time(), cpu_s=time.thread_time() - cpu)
        return result

    return run


def _take_ref(args: tuple[Any, ...], kwargs: dict[str, Any], field: str | None) -> Ref | None:
    value = kwargs.pop(KEYWORD, None)
    if value is None and field is not None:
        value = kwargs.get(field)
        for arg in (*args, *kwargs.values()):
            if value is not None:
                break
            value = arg.get(field) if isinstance(arg, Mapping) else getattr(arg, field, None)
    return Ref.parse(value) if isinstance(value, str) else None


def failure_name(exc: BaseException) -> str:
    """The exception's type as the ledger keeps it (``ValueError``, ``httpx.ConnectError``), as taskbench's
    own ``failure_name`` writes it."""
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return _TYPE_CHARS.sub("_", name)[:100] or "Exception"


class Ref:
    """A parsed task reference: the task id, its run's ledger prefix, the send time (None: not sent)."""

    __slots__ = ("prefix", "sent", "task_id")

    def __init__(self, task_id: str, prefix: str, sent: float | None) -> None:
        self.task_id, self.prefix, self.sent = task_id, prefix, sent

    @classmethod
    def parse(cls, value: str) -> Ref | None:
        found = _REF.match(value)
        if found is None:
            return None
        sent = found["sent"]
        return cls(f"{found['run']}.{found['rest']}", f"taskbench:{found['run']}:", float(sent) if sent else None)


# -- the ledger's connection, one per process (and event loop) ---------------------------------------------


class _Ledger:
    """Redis clients made on first use: a sync one per process (thread-safe pool), an async one per event
    loop (redis.asyncio's connections belong to the loop that opened them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sync: redis.Redis | None = None
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
            weakref.WeakKeyDictionary())
        self._pid = os.getpid()

    @staticmethod
    def url() -> str:
        return os.environ.get(LEDGER_ENV) or DEFAULT_LEDGER_URL

    def _forked(self) -> None:
        if os.getpid() != self._pid:  # a forked child (RQ's work horse, a prefork pool): its own connections
            self._pid, self._sync, self._loops = os.getpid(), None, weakref.WeakKeyDictionary()

    @staticmethod
    def _args(ref: Ref, started: float, finished: float, cpu_s: float | None, error: str | None) -> list[Any]:
        p = ref.prefix
        sent = ref.sent if ref.sent is not None and ref.sent <= started else started
        times = f"{sent:.6f} {started:.6f} {finished:.6f}"
        cpu = "" if cpu_s is None else f"{max(0.0, cpu_s):.6f}"
        return [4, f"{p}ledger:n", f"{p}ledger:t", f"{p}ledger:c", f"{p}ledger:f", ref.task_id, times, cpu,
                error or ""]

    async def record(self, ref: Ref, started: float, finished: float, *, error: str | None = None) -> int:
        self._forked()
        loop = asyncio.get_running_loop()
        client = self._loops.get(loop)
        if client is None:
            client = self._loops[loop] = aioredis.Redis.from_url(self.url())
        args = self._args(ref, started, finished, None, error)
        try:
            count = await client.evalsha(RECORD_EXECUTION_SHA, *args)
        except NoScriptError:  # a Redis that has not seen the script yet (or was restarted empty)
            await client.script_load(RECORD_EXECUTION)
            count = await client.evalsha(RECORD_EXECUTION_SHA, *args)
        return int(count)

    def record_sync(self, ref: Ref, started: float, finished: float, *, cpu_s: float | None = None,
                    error: str | None = None) -> int:
        self._forked()
        with self._lock:
            client = self._sync
            if client is None:
                client = self._sync = redis.Redis.from_url(self.url())
        args = self._args(ref, started, finished, cpu_s, error)
        try:
            count = client.evalsha(RECORD_EXECUTION_SHA, *args)
        except NoScriptError:
            client.script_load(RECORD_EXECUTION)
            count = client.evalsha(RECORD_EXECUTION_SHA, *args)
        return int(cast(Any, count))


_ledger = _Ledger()
