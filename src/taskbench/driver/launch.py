"""Run a load spec in worker processes (:func:`run_load`) or in-loop (:func:`run_load_async`)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event as MPEvent
from typing import Any

from taskbench.driver.engine import Engine
from taskbench.driver.load_spec import LoadSpec, RequestTemplate
from taskbench.driver.result import LoadResult, merge_results

# Time allowed for a worker to start (spawn re-imports the interpreter) and to
# hand its result back after the run's own bound and drain.
_START_GRACE_S = 60.0
_RESULT_GRACE_S = 30.0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop when installed (much cheaper per syscall), else the stdlib loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


async def _run_engines(templates: list[RequestTemplate], spec: LoadSpec, index: int,
                       stop: MPEvent | None = None) -> list[LoadResult]:
    """One engine per target in this loop, with this process's CPU and wall time measured around them.

    With several targets, the first engine to reserve its last request stops them all, so every
    target's rate covers the same seconds (no target runs on alone at the end). ``stop``: the parent
    sets it to end the load early (the engines send nothing more; what is in flight is answered).
    """
    cpu0, wall0 = time.process_time(), time.perf_counter()
    engines = [Engine(t, spec, index * len(templates) + i) for i, t in enumerate(templates)]

    def stop_all() -> None:
        for engine in engines:
            engine.stop()

    if len(engines) > 1:
        for engine in engines:
            engine.at_limit = stop_all
    watch = asyncio.get_running_loop().create_task(_watch_stop(stop, stop_all)) if stop is not None else None
    try:
        results = await asyncio.gather(*(e.run() for e in engines))
    finally:
        if watch is not None:
            watch.cancel()
    cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
    for res in results:  # one process drove them all: its CPU is every engine's
        res.cpu = [{"cpu_s": cpu_s, "wall_s": wall_s, "utilization": cpu_s / wall_s if wall_s > 0 else 0.0}]
    return list(results)


async def run_load_async(template: RequestTemplate, spec: LoadSpec) -> LoadResult:
    """Run the whole spec in the current event loop (one process; ``processes`` ignored).

    CPU accounting covers the whole current process, including anything else
    running in it (e.g. an in-process test server).
    """
    (res,) = await _run_engines([template], spec, 0)
    return merge_results([res])


async def _watch_stop(stop: MPEvent, stop_all: Callable[[], None]) -> None:
    """Poll the parent's stop event (a cheap check, 10 times a second) and stop the engines once it is set.

    Polled, not awaited in a thread: a thread blocked in ``wait`` would hold up the loop's shutdown."""
    while not stop.is_set():  # noqa: ASYNC110 - a multiprocessing Event cannot be awaited
        await asyncio.sleep(0.1)
    stop_all()


def _report_start(barrier: Barrier, started: Callable[[], None]) -> None:
    try:
        barrier.wait(timeout=_START_GRACE_S)
    except threading.BrokenBarrierError:
        return  # a process did not start: run_load reports it
    started()


def _worker_main(
    index: int,
    templates: list[RequestTemplate],
    spec: LoadSpec,
    barrier: Barrier,
    out: MPQueue[tuple[int, list[dict[str, Any]] | str]],
    parent: int | None = None,
    stop: MPEvent | None = None,
) -> None:
    """Entry point of one spawned driver process; it exits when ``parent`` (the harness) dies."""
    if parent is not None:  # a killed harness must not leave its load generator running
        from taskbench.procgroup import exit_with_parent

        exit_with_parent(parent)
    try:
        # Start all processes together so their per-second rows line up.
        barrier.wait(timeout=_START_GRACE_S)
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            results = runner.run(_run_engines(templates, spec, index, stop))
        out.put((index, [res.to_dict() for res in results]))
    except BaseException as exc:  # report anything, the parent must not hang
        out.put((index, f"{type(exc).__name__}: {exc}"))
        raise


def run_load(template: RequestTemplate, spec: LoadSpec, started: Callable[[], None] | None = None,
             stop: threading.Event | None = None) -> LoadResult:
    """Run ``spec`` against ``template`` in ``spec.processes`` spawned processes; blocks.

    Even ``processes=1`` uses a child process so that the CPU measured is the
    driver's alone. Results are merged in the parent. ``started`` is called (on a
    thread of the parent) when the processes are up and start sending: spawning
    them takes a second or more, which is not load. ``stop``: once another thread of
    the parent sets it, the load ends early (``taskbench run --target`` when nothing
    reaches the ledger); what was sent until then is the result.
    """
    return merge_results([parts[0] for parts in _spawn([template], spec, started, stop)])


def run_load_together(templates: list[RequestTemplate], spec: LoadSpec) -> list[LoadResult]:
    """Run ``spec`` against every template at once, from the same driver processes; blocks.

    Each target gets the whole spec (its users, its request bound); the first target whose
    bound is reached stops all of them, so their rates are taken over the same seconds and a
    machine that slows down mid-run slows every target alike. One result per template, in order.
    """
    if not templates:
        raise ValueError("name at least one target")
    per_process = _spawn(templates, spec, None)
    return [merge_results([parts[k] for parts in per_process]) for k in range(len(templates))]


def _spawn(templates: list[RequestTemplate], spec: LoadSpec, started: Callable[[], None] | None,
           stop: threading.Event | None = None) -> list[list[LoadResult]]:
    """``spec.processes`` spawned driver processes, each driving every template; their results in order."""
    ctx = mp.get_context("spawn")
    parts = spec.split()
    stop_all = ctx.Event() if stop is not None else None
    relay = None
    if stop is not None and stop_all is not None:
        relay = threading.Thread(target=_relay_stop, args=(stop, stop_all), name="taskbench-driver-stop", daemon=True)
        relay.start()
    barrier = ctx.Barrier(len(parts) + (started is not None))
    if started is not None:
        threading.Thread(target=_report_start, args=(barrier, started), name="taskbench-driver-start",
                         daemon=True).start()
    out: MPQueue[tuple[int, list[dict[str, Any]] | str]] = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(i, templates, part, barrier, out, os.getpid(), stop_all),
            name=f"taskbench-driver-{i}",
            daemon=True,
        )
        for i, part in enumerate(parts)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + _START_GRACE_S + spec.max_duration + spec.timeout
    deadline += _RESULT_GRACE_S
    results: dict[int, list[LoadResult]] = {}
    failures: list[str] = []
    try:
        while len(results) + len(failures) < len(procs):
            try:
                index, payload = out.get(timeout=0.2)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead and out.empty():
                    # Give a crashed worker's queued message a moment to arrive.
                    time.sleep(0.5)
                    if out.empty():
                        failures.append(f"{dead[0].name} exited with code {dead[0].exitcode}")
                        break
                if time.monotonic() > deadline:
                    failures.append("driver workers did not report in time")
                    break
                continue
            if isinstance(payload, str):
                failures.append(f"worker {index}: {payload}")
            else:
                results[index] = [LoadResult.from_dict(d) for d in payload]
    finally:
        for p in procs:
            p.join(timeout=5.0)
            if p.is_alive():
                p.kill()
                p.join(timeout=5.0)
        out.close()
        if stop_all is not None:
            stop_all.set()  # the relay thread ends with it
    if failures:
        raise RuntimeError("load driver failed: " + "; ".join(failures))
    return [results[i] for i in sorted(results)]


def _relay_stop(stop: threading.Event, stop_all: MPEvent) -> None:
    """Hand the parent's thread event on to the driver processes' event (set once the load ends anyway)."""
    while not stop_all.is_set():
        if stop.wait(0.1):
            stop_all.set()
            return
