"""``--find-max-rate`` on a started stack: the search's steps, one open-model load each, read from the
driver and the ledger and judged by :mod:`taskbench.harness.load.search`.

Each step offers its rate for ``step_s`` seconds under ids of its own (``r<n>.``), then waits for its
backlog to drain (so the next step starts from an empty queue, and a step's e2e figures are complete),
reads its tasks' ledger rows and hands its figures to the search, which says what comes next. A backlog
that does not drain within ``drain_timeout`` ends the search: the rate that left it is past the limit,
and waiting longer would only measure the drain.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from taskbench.driver import LoadResult, LoadSpec, RequestTemplate, run_load
from taskbench.harness.case.drain_wait import drain
from taskbench.harness.load.backlog import origin_of
from taskbench.harness.load.search import Objective, Search, measure
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.ledger import Ledger
from taskbench.ledger.rows import sort_rows
from taskbench.results.load import RateSearch, RateStep

Say = Callable[[str], None]


def step_line(n: int, step: RateStep) -> str:
    """One step as the run's log says it."""
    e2e = "–" if step.e2e_p95_ms is None else f"{step.e2e_p95_ms:.0f} ms"
    verdict = "met" if step.passed else "missed: " + "; ".join(step.reasons)
    return (f"step {n}: {step.rate:.0f} req/s offered, {step.accepted_rps:.0f} accepted, "
            f"{step.executed_per_s:.0f} executed/s, backlog {step.backlog_slope:+.1f} ± {step.slope_stderr:.1f} "
            f"tasks/s, e2e p95 {e2e}: {verdict}")


def run_search(template: RequestTemplate, load: LoadSpec, objective: Objective, *, procs: ProcessSet, client: Any,
               ledger: Ledger, say: Say) -> tuple[RateSearch, LoadResult]:
    """Run the search on this stack. Returns its outcome and one load for the case: the figures of the step
    at the rate found (else the last step), carrying every step's accepted and failed ids (the audit
    covers the whole search)."""
    search = Search(objective)
    started = time.monotonic()
    loads: list[LoadResult] = []
    while (rate := search.next_rate()) is not None:
        n = len(search.steps)
        spec = LoadSpec(model="open", users=load.users, rate=rate, duration=objective.step_s,
                        processes=load.processes, timeout=load.timeout, id_prefix=f"r{n}.")
        before = ledger.executed_count(client)
        result = run_load(template, spec)
        origin, load_end = origin_of(result), time.time()
        loads.append(result)
        drained = drain(procs, client, ledger, target=before + len(result.accepted_ids),
                        accepted=result.accepted_ids, load_end=load_end, timeout=objective.drain_timeout, say=say)
        after = time.time() - load_end if drained.drained else None
        step = measure(rate, result, _times(client, ledger, result.accepted_ids), origin, objective,
                       drained_after_s=after)
        search.record(step)
        say(step_line(n + 1, step))
        if drained.failures:
            search.stop("; ".join(drained.failures))
        elif after is None:
            search.stop(f"the backlog of the step at {rate:.0f} req/s had not drained {objective.drain_timeout:g} s "
                        "after it")
    outcome = search.outcome(elapsed_s=time.monotonic() - started)
    at = [i for i, s in enumerate(search.steps) if outcome.rate is not None and s.rate == outcome.rate]
    shown = loads[at[-1] if at else -1]
    every = dataclasses.replace(shown, accepted_ids=[i for r in loads for i in r.accepted_ids],
                                failed_ids={k: v for r in loads for k, v in r.failed_ids.items()})
    return outcome, every


def _times(client: Any, ledger: Ledger, ids: list[str], batch: int = 10_000) -> dict[str, tuple[float, float, float]]:
    """The ledger's (enqueued, started, finished) rows of ``ids`` (those executed)."""
    counts: dict[str, Any] = {}
    times: dict[str, Any] = {}
    for i in range(0, len(ids), batch):
        chunk = ids[i:i + batch]
        counts.update({k: v for k, v in zip(chunk, client.hmget(ledger.count_key, chunk), strict=True) if v})
        times.update({k: v for k, v in zip(chunk, client.hmget(ledger.times_key, chunk), strict=True) if v})
    return sort_rows(counts, times).times
