"""Enqueues one celery-pools case's tasks and waits for them; prints one JSON line.

Run by the harness inside the celery environment, after the workers are ready:
``python -m taskbench.scenarios.celery_probe '{"test": "io", "tasks": 200, ...}'``. Beside the counts, when
the worker received each task (Celery's ``task_received``), and when each started and finished, in s from
the enqueue, and how many were received, and how many started, before the first finished (seed 003's
prefetch: a prefork 4 worker received all five, and started four).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def run(params: dict[str, Any]) -> dict[str, Any]:
    from celery import chord

    from taskbench.scenarios.celery_app import PREFIX, client, crunch_task, get_number, process_task, sum_numbers

    test = params["test"]
    tasks = int(params.get("tasks", 100))
    iterations = int(params.get("cpu_iterations", 1_000_000))
    timeout = float(params.get("timeout", 120.0))
    r = client()
    out: dict[str, Any] = {"test": test}
    start, start_wall = time.perf_counter(), time.time()
    if test == "chord":
        size = int(params.get("chord_size", 5))
        expected = size + 1
        result = chord([get_number.si(f"c{i}") for i in range(size)], sum_numbers.s()).apply_async()
        out["chord_sum"] = result.get(timeout=timeout, propagate=True)
    else:
        expected = tasks
        for i in range(tasks):
            if test == "process":
                process_task.apply_async((f"t{i}", iterations), queue="cpu")
            elif test == "io" or (test == "routing" and i % 2 == 0):
                get_number.apply_async((f"t{i}",), queue="io")
            else:
                crunch_task.apply_async((f"t{i}", iterations), queue="cpu")
    out["enqueue_s"] = time.perf_counter() - start
    deadline = start + timeout
    while int(r.hlen(f"{PREFIX}runs")) < expected and time.perf_counter() < deadline:
        time.sleep(0.005)
    elapsed = time.perf_counter() - start
    time.sleep(0.2)  # a duplicate would show up now
    runs = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in r.hgetall(f"{PREFIX}runs").items()}
    out.update(
        expected=expected, executed=len(runs), elapsed_s=elapsed,
        lost=max(0, expected - len(runs)), duplicated=sum(v - 1 for v in runs.values() if v > 1),
        max_parallel=int(r.get(f"{PREFIX}peak") or 0), timed_out=len(runs) < expected,
    )
    received, started, finished = (sorted(float(t) for t in r.lrange(f"{PREFIX}{name}", 0, -1))
                                   for name in ("received", "started", "finished"))
    errors: dict[str, int] = {}
    for message in r.hvals(f"{PREFIX}errors"):
        text = message.decode() if isinstance(message, bytes) else message
        errors[text] = errors.get(text, 0) + 1
    out["errors"] = errors
    first_finish = finished[0] if finished else float("inf")
    out.update(received_before_first_finish=sum(1 for t in received if t < first_finish),
               started_before_first_finish=sum(1 for t in started if t < first_finish),
               **{f"{name}_s": [round(t - start_wall, 3) for t in times]
                  for name, times in (("received", received), ("started", started), ("finished", finished))})
    return out


def main() -> None:
    print(json.dumps(run(json.loads(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()
