"""The backlog of a load over time, from the driver's per-second 2xx and the ledger's finish times.

Everything here is arithmetic on what a run recorded: the driver counts its 2xx per second from its
first request (``LoadResult.per_second``), the ledger holds each task's (enqueued, started, finished)
wall-clock times; ``origin`` is the first request on the wall clock. A second's backlog is what was
accepted up to its end minus what had finished, so it counts tasks queued and tasks running.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence

from taskbench.driver import LoadResult
from taskbench.results.load import BacklogSecond
from taskbench.results.model import Percentiles


def origin_of(load: LoadResult) -> float:
    """The load's first request on the wall clock (the driver stamps it with ``perf_counter``, which is
    one clock for every process of this host)."""
    return load.first_send + (time.time() - time.perf_counter())


def series(accepted: Iterable[tuple[int, int]], finishes: Iterable[float], origin: float,
           seconds: int) -> list[BacklogSecond]:
    """Per second from ``origin``: ``accepted`` as (second, 2xx) rows, executions from ``finishes``
    (wall-clock times), for at least ``seconds`` seconds and until the last execution."""
    acc: dict[int, int] = {}
    for t, ok in accepted:
        acc[t] = acc.get(t, 0) + ok
    exe: dict[int, int] = {}
    for finish in finishes:
        if finish >= origin:
            second = math.floor(finish - origin)
            exe[second] = exe.get(second, 0) + 1
    last = max([seconds - 1, *acc, *exe])
    out, queued = [], 0
    for t in range(last + 1):
        queued += acc.get(t, 0) - exe.get(t, 0)
        out.append(BacklogSecond(t=t, accepted=acc.get(t, 0), executed=exe.get(t, 0), backlog=max(0, queued)))
    return out


def at(points: Sequence[BacklogSecond], when: float) -> int:
    """The backlog at the end of the second that holds ``when`` (seconds since the origin)."""
    if not points:
        return 0
    index = min(len(points) - 1, max(0, math.ceil(when) - 1))
    return points[index].backlog


def slope(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope of ``points`` and its standard error (0 with fewer than three points)."""
    n = len(points)
    if n < 2:
        return 0.0, 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0, 0.0
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    if n < 3:
        return b, 0.0
    residuals = sum((y - my - b * (x - mx)) ** 2 for x, y in points)
    return b, math.sqrt(residuals / (n - 2) / sxx)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def percentiles(values_ms: Sequence[float]) -> Percentiles:
    """p50/p90/p95/p99/p99.9, max, mean and count of latencies in milliseconds (exact, not bucketed)."""
    if not values_ms:
        return Percentiles()
    return Percentiles(p50=percentile(values_ms, 50), p90=percentile(values_ms, 90), p95=percentile(values_ms, 95),
                       p99=percentile(values_ms, 99), p99_9=percentile(values_ms, 99.9), max=max(values_ms),
                       mean=sum(values_ms) / len(values_ms), count=len(values_ms))
