"""What decides between backends: the API's rate, the workers' rate, the backlog the load left, its drain.

A fast API in front of slow workers answers fast and runs its tasks late, so a table that leads with
requests per second reads the wrong way round. The workers *keep up* when they ran at least
:data:`KEEP_UP_SHARE` of the rate the API accepted, or when the last task finished within
:data:`KEEP_UP_DRAIN_S` of the load's last answer; otherwise :func:`bottleneck_line` names what lagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from taskbench.results import QueueCase

#: executed/s at least this share of accepted/s: the workers keep up (a measurement's noise is a few %)
KEEP_UP_SHARE = 0.9
#: the last task finished within this many seconds of the load's end: the workers keep up
KEEP_UP_DRAIN_S = 1.0


@dataclass(frozen=True)
class Pace:
    accepted_per_s: float | None
    executed_per_s: float | None
    backlog_end: int | None
    drain_s: float | None
    e2e_p95_ms: float | None


def pace(case: QueueCase) -> Pace:
    """The case's deciding figures (accepted/s from the load's length in files written before the figure)."""
    s = case.summary
    accepted = s.accepted_per_s
    if accepted is None and s.accepted is not None and case.load is not None and case.load.elapsed_s > 0:
        accepted = s.accepted / case.load.elapsed_s
    return Pace(accepted, s.executed_per_s, s.backlog_end, s.drain_s, s.e2e_p95_ms)


def keeps_up(p: Pace) -> bool | None:
    """Whether the workers kept up with the API (None: the figures to tell are missing)."""
    if p.drain_s is not None and p.drain_s < KEEP_UP_DRAIN_S:
        return True
    if p.accepted_per_s is None or p.executed_per_s is None:
        return None
    return p.executed_per_s >= KEEP_UP_SHARE * p.accepted_per_s


def mode_words(case: QueueCase) -> str:
    """When the task is handed over, in the API's answer's terms (``--enqueue-mode``; no worker: no queue)."""
    if not case.has_worker:
        return "no queue"
    return "after 202" if case.enqueue_mode == "after-response" else "before 202"


def seconds(ms: float | None) -> str:
    """A latency in the unit that reads: ``48 ms``, ``1.7 s``, ``37 s``."""
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s" if ms < 10_000 else f"{ms / 1000:.0f} s"


def bottleneck_line(case: QueueCase) -> str | None:
    """One line when the workers ran slower than the API accepted; None when they kept up, when it is not
    known, or when the load was shaped to outrun them (a rate search, phases, an injected fault: their own
    lines say what happened).

    ``arq: the API accepted 896/s, its 1 worker (concurrency 10) ran 198/s: 8,412 tasks were left at the
    load's end and the last ran 40 s after it (e2e p95 37 s). `taskbench run -b arq --workers 5 --find-max-rate`
    measures the rate 5 workers sustain."""
    if case.rate_search is not None or case.phases or (case.fault is not None and case.fault.injected):
        return None
    p = pace(case)
    if keeps_up(p) is not False or p.accepted_per_s is None or p.executed_per_s is None:
        return None
    if case.has_worker:
        runner = f"its {case.workers} worker{'s' if case.workers != 1 else ''}" if case.workers else "its workers"
        runner += f" (concurrency {case.concurrency})" if case.concurrency else ""
    else:
        runner = "the API process itself"
    line = f"{case.name}: the API accepted {p.accepted_per_s:,.0f}/s, {runner} ran {p.executed_per_s:,.0f}/s"
    waited = [f"{p.backlog_end:,} tasks were left at the load's end"] if p.backlog_end else []
    if p.drain_s is not None:
        drain = f"{p.drain_s:.1f}" if p.drain_s < 10 else f"{p.drain_s:.0f}"
        waited.append(f"the last ran {drain} s after it" if waited else
                      f"the last task ran {drain} s after the load's end")
    if waited:
        line += ": " + " and ".join(waited)
    if p.e2e_p95_ms is not None:
        line += f" (e2e p95 {seconds(p.e2e_p95_ms)})"
    line += ". "
    if case.has_worker and case.workers and p.executed_per_s > 0:
        # a guess from linear scaling, which the command then measures
        need = min(64, math.ceil(case.workers * p.accepted_per_s / p.executed_per_s))
        return line + (f"`taskbench run -b {case.backend} --workers {need} --find-max-rate` measures the rate "
                       f"{need} workers sustain")
    return line + f"`taskbench run -b {case.backend} --find-max-rate` measures the highest rate it sustains"
