"""The end-to-end latency over a soak, from the ledger's times, on the series' time axis.

Read once after the drain from the times the audit reads anyway (enqueue and finish of every task), not
sampled live: a task's latency is known only once it has run, and reading the ledger every second would
cost the broker's Redis what the load costs it. Each task counts in the point whose window holds its
finish (the windows split at the midpoints between points), so a point's p95 is of the tasks that finished
around it; a window where fewer than :data:`MIN_TASKS` finished has no figure.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence

MIN_TASKS = 3


def _rank(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0..1) of sorted values."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def e2e_over_time(t_s: Sequence[float], times: Mapping[str, tuple[float, float, float]], *, t0: float,
                  skip_prefix: str = "") -> dict[str, list[float | None]]:
    """``e2e_p50_ms`` and ``e2e_p95_ms`` per point of ``t_s`` (seconds from ``t0``), from each task's
    (enqueued, started, finished) times; ids starting with ``skip_prefix`` (the warm-up's) left out."""
    windows: list[list[float]] = [[] for _ in t_s]
    if not t_s:
        return {"e2e_p50_ms": [], "e2e_p95_ms": []}
    edges = [(a + b) / 2 for a, b in itertools.pairwise(t_s)]
    for task_id, (enqueued, _started, finished) in times.items():
        if skip_prefix and task_id.startswith(skip_prefix):
            continue
        windows[bisect.bisect_right(edges, finished - t0)].append(1000 * (finished - enqueued))
    p50: list[float | None] = []
    p95: list[float | None] = []
    for window in windows:
        if len(window) < MIN_TASKS:
            p50.append(None)
            p95.append(None)
            continue
        window.sort()
        p50.append(_rank(window, 0.5))
        p95.append(_rank(window, 0.95))
    return {"e2e_p50_ms": p50, "e2e_p95_ms": p95}
