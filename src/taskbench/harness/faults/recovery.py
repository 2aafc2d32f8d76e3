"""What a fault cost, from the ledger and the driver: recovery times, throughput, timeline, verdict.

All times are seconds after the fault's start (``record.at``; the first kill of a repeated one).

- first execution: the first task that started after the fault, and finished;
- executing again (50 %) / 90 %: the start of the first one-second window after the fault that holds
  half / 90 % of the executions per second of the seconds before the fault (up to three, from the
  load's first request: the warm-up and the driver's start-up do not count);
- throughput ratio: executions per second over a window as long as the pre-fault one, starting where
  the rate was back to 90 % (else 50 %), over the pre-fault rate; None when the window runs past the
  last execution (the work ran out, nothing to compare);
- timeline: per second since the load started, tasks accepted (the driver's 2xx) and executed (the
  ledger's finish times).

The verdict (:func:`broken_promises`) is what fails a fault case: a loss its backend promises to
prevent, a duplicate where it promises at most once, or executions that never came back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from taskbench import backends
from taskbench.backends import bounds as promise_bounds
from taskbench.backends.bounds import PER_KILL, Bound
from taskbench.harness.faults.verdict import Verdict, judge
from taskbench.results import FaultRecord, FaultSecond, Load, Promise, PromiseBound

RECOVERED_SHARE = 0.5  # "executing again": back to half the rate of the seconds before the fault
FULL_SHARE = 0.9
_WINDOW_S = 1.0
_BEFORE_S = 3.0
_TIMELINE_MAX_S = 3600


def rate_before(events: list[float], fault_at: float, since: float | None = None) -> tuple[float, float] | None:
    """Events per second over the seconds before the fault (up to three, none before ``since``: the
    load's start), and that span; None if < 0.5 s."""
    events = sorted(events)
    before_from = max(fault_at - _BEFORE_S, events[0], since or events[0]) if events else fault_at
    span = fault_at - before_from
    if span < 0.5:
        return None
    return sum(1 for t in events if before_from <= t < fault_at) / span, span


def recovery(events: list[float], fault_at: float, share: float = RECOVERED_SHARE,
             since: float | None = None) -> float | None:
    """Seconds from the fault until ``events`` (timestamps) come at ``share`` of their earlier rate again.

    None when there was no rate to recover to, or it never came back.
    """
    before = rate_before(events, fault_at, since)
    need = share * before[0] * _WINDOW_S if before else 0.0
    if need <= 0:
        return None
    after = sorted(t for t in events if t >= fault_at)
    # the first one-second window, starting at an event, that holds enough events: its start
    hi = 0
    for lo, start in enumerate(after):
        while hi < len(after) and after[hi] < start + _WINDOW_S:
            hi += 1
        if hi - lo >= need:
            return start - fault_at
    return None


def timeline(load: Load | None, finished: list[float], load_start: float, offset: float = 0.0) -> list[FaultSecond]:
    """Accepted (driver) and executed (ledger) per second since the load started.

    The driver counts its seconds from its own start, ``offset`` seconds after ``load_start`` (its
    processes are spawned first): its rows move by that much, to the nearest second.
    """
    shift = round(offset)
    accepted = {row.t + shift: row.ok for row in load.per_second} if load is not None else {}
    executed: dict[int, int] = {}
    for t in finished:
        second = math.floor(t - load_start)
        if 0 <= second < _TIMELINE_MAX_S:
            executed[second] = executed.get(second, 0) + 1
    last = max([*accepted, *executed], default=-1)
    return [FaultSecond(t=t, accepted=accepted.get(t, 0), executed=executed.get(t, 0)) for t in range(last + 1)]


def summarize(record: FaultRecord, times: Mapping[str, tuple[float, ...]], load: Load | None = None,
              promise: Promise | None = None, ignore_prefix: str = "") -> FaultRecord:
    """The record with the recovery figures, from the ledger's (enqueued, started, finished) times
    (``ignore_prefix``: the ids of another phase, the warm-up)."""
    if not record.injected or record.at is None:
        return record
    rows = [r for task_id, r in times.items() if not task_id.startswith(ignore_prefix)] if ignore_prefix \
        else list(times.values())
    at, since = record.at, record.load_start
    if since is not None and rows:  # the first request of the load (the driver's start-up is not load)
        since = max(since, min(r[0] for r in rows))
    finished = [r[2] for r in rows]
    update: dict[str, object] = {
        "promise": promise,
        "first_send": since,
        "accepting_again_s": recovery([r[0] for r in rows], at, since=since),
        "executing_again_s": recovery(finished, at, since=since),
        "executing_90_s": recovery(finished, at, FULL_SHARE, since=since),
    }
    after = [r[1] for r in rows if r[1] >= at]
    update["first_execution_s"] = (min(after) - at) if after else None
    before = rate_before(finished, at, since)
    if before is not None and before[0] > 0:
        rate, span = before
        update["pre_fault_rate"] = rate
        # judged only when tasks came in after the fault (an API back after the load ended leaves
        # nothing to execute: no verdict), or when it hit the drain (a backlog was left to run)
        if record.during_drain or any(r[0] >= (record.ended or at) for r in rows):
            update["recovered"] = update["executing_again_s"] is not None
        back = update["executing_90_s"] if update["executing_90_s"] is not None else update["executing_again_s"]
        if isinstance(back, float) and finished and at + back + span <= max(finished):
            lo = at + back
            post = sum(1 for t in finished if lo <= t < lo + span) / span
            update["post_recovery_rate"], update["throughput_ratio"] = post, post / rate
    if record.load_start is not None:
        offset = (since or record.load_start) - record.load_start
        update["timeline"] = timeline(load, finished, record.load_start, offset)
    return record.model_copy(update=update)


def fault_verdict(record: FaultRecord | None, *, lost: int, duplicated: int) -> Verdict:
    """An injected fault's figures against its promise's bounds (:mod:`.verdict`): what broke it, and
    what it cost inside them."""
    if record is None or not record.injected or record.promise is None:
        return Verdict()
    verdict = judge(record.promise, lost=lost, duplicated=duplicated, recovered=record.recovered,
                    kills=len(record.kills) or 1)
    if verdict.unrecovered:
        verdict.broken.append(f"{record.target} never recovered from {record.fault}: executions never came back "
                              f"to {RECOVERED_SHARE:.0%} of the {record.pre_fault_rate or 0:.0f}/s before the fault")
    return verdict


def broken_promises(record: FaultRecord | None, *, lost: int, duplicated: int) -> list[str]:
    """Why an injected fault fails its case: a figure beyond its promise's bounds, or no recovery."""
    return fault_verdict(record, lost=lost, duplicated=duplicated).broken


def unkept_promises(promise: Promise, *, lost: int, duplicated: int, cause: str = "", kills: int = 1) -> list[str]:
    """What ``promise`` said and a fault (``cause``: one the harness did not inject) did not keep."""
    return judge(promise, lost=lost, duplicated=duplicated, kills=kills, cause=cause).broken


def _resolved(bound: Bound, workers: int, concurrency: int) -> PromiseBound:
    return PromiseBound(figure=bound.figure, tasks=bound.limit(workers=workers, concurrency=concurrency),
                        per_kill=PER_KILL in bound.per, text=bound.text, source=bound.source)


def promise_of(backend: str, broker: str, *, durable: bool, broker_keeps: bool = True, why: str = "",
               settings: Mapping[str, Any] | None = None, fault: str | None = None, workers: int = 1,
               concurrency: int = 1, versions: str = "lock") -> Promise:
    """What ``backend`` on ``broker`` promises across a fault, as taskbench configures it: its registry
    entry's :class:`~taskbench.backends.Delivery` on that broker.

    ``durable``: the 2xx is sent after the broker holds the task (a queue backend, ``awaited`` enqueue).
    ``broker_keeps``: the broker keeps what it holds across the fault (False: a restart of a broker
    without persistence). ``why``: the case's reason for ``durable`` False (its ``durability`` text).
    ``settings``: the run's values of the library settings that change the promise
    (``RunConfig.promise_settings``; left out: the libraries' defaults). ``fault``: the case's fault
    kind, whose bounds apply (None: a worker that dies on its own, judged as a kill); ``workers`` and
    ``concurrency``: the case's, which multiply the bounds that count per worker or per slot.
    ``versions``: ``lock``, or a pinned set (``--versions``) whose libraries' promises the registry does
    not state (it states the lock's versions'): there nothing is promised, and a fault is measured only.
    """
    def resolved(bounds: tuple[Bound, ...]) -> list[PromiseBound]:
        return [_resolved(b, workers, concurrency) for b in bounds if b.applies(fault, data_lost=not broker_keeps)]

    delivery = backends.info(backend).delivery_on(broker, settings)
    if versions != "lock":
        durable, why = False, (f"on {versions}'s versions, whose promise taskbench does not state "
                               "(its registry's is the lock's versions')")
    if not durable:  # nothing is promised; a window of the library's still says whether it recovers
        kept = promise_bounds.nothing_kept_bounds(why or "the 2xx comes before the task is safe")
        own = (*kept, *(b for b in delivery.all_bounds() if b.figure == promise_bounds.NO_RECOVERY))
        if why:
            return Promise(keeps_accepted=False, no_duplicates=False, text=f"{backend}: {why} (nothing is promised)",
                           bounds=resolved(own))
        what = "background tasks" if backend == "background" else f"{backend} with the enqueue after the response"
        return Promise(keeps_accepted=False, no_duplicates=False,
                       text=f"{what} (the 2xx comes before the task is safe: nothing is promised)",
                       bounds=resolved(own))
    at_most_once = delivery.guarantee == backends.AT_MOST_ONCE
    own = (*delivery.all_bounds(), *(() if broker_keeps else (promise_bounds.data_lost_bound(),)))
    return Promise(keeps_accepted=broker_keeps and not at_most_once, no_duplicates=at_most_once,
                   text=f"{backend} on {broker} ({delivery.guarantee}"
                        f"{'' if broker_keeps else ', broker without persistence'})",
                   bounds=resolved(own))
