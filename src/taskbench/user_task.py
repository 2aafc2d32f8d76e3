"""A user's own task body (``--workload module:callable``): found, imported and called in every backend's worker.

The workload is named ``module:callable`` (``myapp.tasks:send_invoice``, imported as a module) or
``path/to/file.py:callable`` (loaded from the file, its folder importable too), the callable possibly
dotted (``tasks.py:Mailer.send``). ``TASKBENCH_TASK_PATH`` (``--path``, folders joined by ``os.pathsep``)
is put at the front of ``sys.path`` first. The callable takes one argument, the task's payload (a dict:
``--payload``'s template with the task's id filled in, or ``{"task_id": ...}`` without one), and may be a
plain function or a coroutine function.

Each call is timed in CPU seconds of its own thread, so a task that holds the GIL or burns CPU shows it
apart from one that waits: a plain function runs in a thread of its own pool (``--concurrency`` threads,
as a library's thread pool would run it), measured with ``time.thread_time`` around the call; a coroutine
runs on the worker's event loop, measured around each of its steps (:class:`_Timed`), so what other
tasks do while it awaits is not counted. A call that raises is an outcome, not an error of the run: the
exception is caught, any :class:`BaseException` (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``
too: a task must not end its worker), its type recorded as the execution's failure
(:func:`taskbench.ledger.failure_name`) and the task returns normally to the library, so no library retries it
and the ledger counts it once, as **failed**. Only a cancellation of the library's own (its time limit, its
stop) passes through: the task did not finish, and the ledger's start record says it began. In a forked child
(a forking library's work horse or process worker) :meth:`UserTask.call_sync` runs it, a coroutine function in
an event loop of the call's own.

A callable must run its body when called: a generator function or an async generator function is refused
when loaded (its call only makes an iterator, so every "execution" would be one that never ran). A plain
function that returns an awaitable (a coroutine, a future: a decorated coroutine function, a lambda) has it
awaited on the loop, as a coroutine function's (and so has a coroutine's result that is awaitable); a plain
function that returns a generator is recorded failed, :class:`BodyNotRun` (what a coroutine returns is its
value: its body ran).

``python -m taskbench.user_task SPEC`` is the pre-flight check the harness runs in every backend's
environment before any load: it prints ``ok sync`` or ``ok async``, or one line naming the import error
and exits 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import inspect
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from taskbench.ledger import failure_name

#: what the outcome of one call is: (CPU seconds, the exception type of a call that raised, or None)
Outcome = tuple[float, str | None]


class TaskSpecError(ValueError):
    """The ``module:callable`` cannot be parsed, imported or called: one line saying why."""


class BodyNotRun(TypeError):  # noqa: N818 (its name is what the audit shows as the failure's type)
    """What a call is recorded as when it returned a generator: the body it holds never ran."""


#: how many awaitables in a row a call may return (an awaitable whose result is awaitable again)
MAX_AWAIT_DEPTH = 8


def split_spec(spec: str) -> tuple[str, str]:
    """``(module or file, attribute)`` of ``module:callable`` / ``path/file.py:callable``."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise TaskSpecError(f"a task is module:callable or path/to/file.py:callable, got {spec!r}")
    if not all(part.isidentifier() for part in attr.split(".")):
        raise TaskSpecError(f"{attr!r} is not a name of a callable (in {spec!r})")
    return target, attr


def is_file_spec(spec: str) -> bool:
    """Whether ``spec`` names a file (``path/x.py:f``), not a module (``pkg.mod:f``)."""
    target = split_spec(spec)[0]
    return target.endswith(".py") or os.sep in target or "/" in target


def add_paths(paths: str) -> None:
    """Put the folders of ``paths`` (``os.pathsep``-separated) at the front of ``sys.path``, once each."""
    for folder in reversed([p for p in paths.split(os.pathsep) if p]):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def load(spec: str, paths: str = "") -> Callable[[dict[str, Any]], Any]:
    """The callable ``spec`` names, imported in this process (TaskSpecError in one line otherwise)."""
    target, attr = split_spec(spec)
    add_paths(paths)
    try:
        module = _from_file(Path(target)) if is_file_spec(spec) else importlib.import_module(target)
    except TaskSpecError:
        raise
    except BaseException as exc:  # an import runs the user's code: anything may come out of it
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise TaskSpecError(f"cannot import {target!r}: {type(exc).__name__}: {_one_line(exc)}") from None
    found: Any = module
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise TaskSpecError(f"{target!r} has no attribute {attr!r}") from None
    if not callable(found):
        raise TaskSpecError(f"{spec!r} is a {type(found).__name__}, not a callable")
    return found  # type: ignore[no-any-return]


def _from_file(path: Path) -> Any:
    path = path.resolve()
    if not path.is_file():
        raise TaskSpecError(f"no such file: {path}")
    add_paths(str(path.parent))  # its own imports of modules beside it work as in a script
    # named as a script beside it would import it (``tasks``), so its exceptions read ``tasks.FlakyError``;
    # a name some other module holds already gets a prefix
    name = path.stem if path.stem.isidentifier() else f"taskbench_user_{abs(hash(path.stem))}"
    known = sys.modules.get(name)
    if known is not None:
        if getattr(known, "__file__", None) == str(path):
            return known
        name = f"taskbench_user_{name}"
        if name in sys.modules:
            return sys.modules[name]
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise TaskSpecError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _is(func: Callable[..., Any], test: Callable[[Any], bool]) -> bool:
    """``test`` of the function, of a partial's function, or of an object's ``__call__``."""
    if isinstance(func, functools.partial):
        return _is(func.func, test)
    method = type(func).__call__ if not inspect.isroutine(func) else None
    return test(func) or (method is not None and test(method))


def is_async(func: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return _is(func, inspect.iscoroutinefunction)


def refuse_generator(spec: str, func: Callable[..., Any]) -> None:
    """TaskSpecError for a generator function or an async generator function: calling it runs none of its body."""
    for test, kind in ((inspect.isasyncgenfunction, "an async generator function"),
                       (inspect.isgeneratorfunction, "a generator function")):
        if _is(func, test):
            raise TaskSpecError(f"{spec!r} is {kind}: a call only makes an iterator and runs none of its body, "
                                "so taskbench would count executions that never ran; make it a plain function "
                                "or an async def without yield")


def _cancelled_by_caller() -> bool:
    """Whether the running task is being cancelled (the library's time limit, its stop), not by the user's code."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return False
    return task is not None and task.cancelling() > 0


def _not_run(result: Any) -> bool:
    """A generator (or an async one) returned by a call: its body has not run."""
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        with contextlib.suppress(BaseException):  # it never started: closing runs none of its code
            result.close() if inspect.isgenerator(result) else result.aclose().close()
        return True
    return False


class _Timed:
    """Awaits a coroutine and adds the thread's CPU time of each of its steps to ``cpu_s``: what the
    coroutine itself computed, without what other tasks on the loop did while it was suspended."""

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.cpu_s = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, sent, thrown = self.coro, None, None
        while True:
            began = time.thread_time()
            try:
                yielded = coro.throw(thrown) if thrown is not None else coro.send(sent)
            except StopIteration as done:
                self.cpu_s += time.thread_time() - began
                return done.value
            except BaseException:
                self.cpu_s += time.thread_time() - began
                raise
            self.cpu_s += time.thread_time() - began
            try:
                sent, thrown = (yield yielded), None
            except BaseException as exc:  # a cancellation: handed to the coroutine, as await would
                sent, thrown = None, exc


class UserTask:
    """One process's handle on the user's callable: loaded once, called per task (see the module)."""

    def __init__(self, spec: str, paths: str = "", *, threads: int = 10) -> None:
        self.spec = spec
        self.func = load(spec, paths)
        refuse_generator(spec, self.func)
        self.is_async = is_async(self.func)
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._running = 0  # calls handed to the pool and not returned: a hung one holds its thread

    async def call(self, payload: dict[str, Any], started: Callable[[], Awaitable[Any]] | None = None) -> Outcome:
        """Run one call on this event loop (a coroutine) or in the pool (a function, then on this loop
        what it returned if that is awaitable).

        ``started()`` is called on this loop as the body begins (in the pool: once a thread is free for it, so
        a call queued behind hung ones has not begun) and what it returns (a start record on its way) is
        awaited once the call returned: the record leaves with the ledger's next batch, while the body runs.
        """
        starts: list[Awaitable[Any]] = []
        if self.is_async:
            if started is not None:
                starts.append(started())
            outcome = await self._settle(lambda: self.func(payload))
        else:
            outcome = await self._in_pool(payload, started, starts)
        for sent in starts:
            await sent  # a start record that failed fails the task, as an execution's record would
        return outcome

    async def _in_pool(self, payload: dict[str, Any], started: Callable[[], Awaitable[Any]] | None,
                       starts: list[Awaitable[Any]]) -> Outcome:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="taskbench-user")
        loop = asyncio.get_running_loop()
        begin: Callable[[], None] | None = None
        with self._lock:
            free = self._running < self._threads  # then a thread takes the call at once
            self._running += 1
        if started is not None and free:
            starts.append(started())
        elif started is not None:
            def begin() -> None:  # from the thread, once it has the call; not waited for
                loop.call_soon_threadsafe(lambda: starts.append(started()))
        cpu_s, error, pending = await loop.run_in_executor(self._pool, self._counted, payload, begin)
        if pending is None:
            return cpu_s, error
        more_s, error = await self._settle(lambda: pending)
        return cpu_s + more_s, error

    def _counted(self, payload: dict[str, Any], begin: Callable[[], None] | None) -> tuple[float, str | None, Any]:
        """:meth:`_invoke` in a pool thread, counted among the running calls until it returns (if ever)."""
        try:
            if begin is not None:
                begin()
            return self._invoke(payload)
        finally:
            with self._lock:
                self._running -= 1

    def call_sync(self, payload: dict[str, Any]) -> Outcome:
        """Run one call in this thread (a forked child, a pool thread); a coroutine in a loop of its own."""
        if self.is_async:
            return asyncio.run(self.call(payload))
        cpu_s, error, pending = self._invoke(payload)
        if pending is None:
            return cpu_s, error
        more_s, error = asyncio.run(self._settle(lambda: pending))
        return cpu_s + more_s, error

    def _invoke(self, payload: dict[str, Any]) -> tuple[float, str | None, Any]:
        """The plain function called in this thread: (CPU seconds, the failure, an awaitable it returned)."""
        began = time.thread_time()
        try:
            result = self.func(payload)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt too: the task's outcome, never the worker's end
            return time.thread_time() - began, failure_name(exc), None
        cpu_s = time.thread_time() - began
        if inspect.isawaitable(result):
            return cpu_s, None, result
        return cpu_s, failure_name(BodyNotRun()) if _not_run(result) else None, None

    async def _settle(self, make: Callable[[], Any]) -> Outcome:
        """Await what ``make()`` gives (and what that returns, while it is awaitable), over its own steps'
        CPU; any exception is the outcome but a cancellation of the caller's."""
        timed = _Timed(None)
        began = time.thread_time()
        try:
            result = make()
            timed.cpu_s += time.thread_time() - began
            for _ in range(MAX_AWAIT_DEPTH):
                if not inspect.isawaitable(result):
                    break
                timed.coro = result.__await__()
                result = await timed
            if inspect.isawaitable(result):
                raise BodyNotRun(f"more than {MAX_AWAIT_DEPTH} awaitables in a row")
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and _cancelled_by_caller():
                raise  # the library's time limit or stop: the task did not finish, its start is recorded
            return timed.cpu_s, failure_name(exc)
        return timed.cpu_s, None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def payload_of(task_payload: dict[str, Any] | None, task_id: str) -> dict[str, Any]:
    """What the callable gets: the task's payload, or ``{"task_id": ...}`` when the run has none."""
    return task_payload if task_payload is not None else {"task_id": task_id}


def check(spec: str, paths: str = "") -> str:
    """``sync`` or ``async``: the pre-flight check of one environment (TaskSpecError otherwise)."""
    with contextlib.redirect_stdout(sys.stderr):  # an import that prints must not garble the answer
        task = UserTask(spec, paths)
    return "async" if task.is_async else "sync"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m taskbench.user_task module:callable", file=sys.stderr)
        return 2
    try:
        kind = check(argv[0], os.environ.get("TASKBENCH_TASK_PATH", ""))
    except TaskSpecError as exc:
        print(str(exc))
        return 2
    print(f"ok {kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
