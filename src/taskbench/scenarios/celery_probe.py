"""Enqueues one celery-pools case's tasks and waits for them; prints one JSON line.

Run by the harness inside the celery environment, after the workers are ready:
``python -m taskbench.scenarios.celery_probe '{"test": "io", "tasks": 200, ...}'``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def run(params: dict[str, Any]) -> dict[str, Any]:
    from celery import chord

    from taskbench.scenarios.celery_app import PREFIX, client, crunch_task, get_number, sum_numbers

    test = params["test"]
    tasks = int(params.get("tasks", 100))
    iterations = int(params.get("cpu_iterations", 1_000_000))
    timeout = float(params.get("timeout", 120.0))
    r = client()
    out: dict[str, Any] = {"test": test}
    start = time.perf_counter()
    if test == "chord":
        size = int(params.get("chord_size", 5))
        expected = size + 1
        result = chord([get_number.si(f"c{i}") for i in range(size)], sum_numbers.s()).apply_async()
        out["chord_sum"] = result.get(timeout=timeout, propagate=True)
    else:
        expected = tasks
        for i in range(tasks):
            if test == "io" or (test == "routing" and i % 2 == 0):
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
    return out


def main() -> None:
    print(json.dumps(run(json.loads(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()
