"""The audit of a case: the ids the driver saw accepted against the ledger's records (:mod:`taskbench.ledger`).

Never raises on what the ledger holds: a row that is not a valid record is *corrupt*
(:mod:`taskbench.ledger.rows`), left out of every other figure, counted and sampled.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from taskbench.histogram import Histogram
from taskbench.ledger.rows import Outcomes, sort_rows
from taskbench.results.model import AuditResult

SAMPLE = 20  # how many ids of each anomaly the audit lists


@dataclass(kw_only=True)
class Audit:
    """What happened to the accepted tasks of one case."""

    accepted: int
    executed: int  # accepted tasks that ran at least once
    lost: int  # accepted, never started
    duplicated: int  # ran more than once (any task id)
    extra_executions: int  # executions beyond the first, summed
    late: int  # finished after the drain deadline
    unacknowledged: int  # ran, but the driver saw no 2xx for it (Jepsen's categories: "unexpected")
    first_start: float | None
    last_finish: float | None
    end_to_end: Histogram = field(default_factory=Histogram)  # enqueue -> finish, µs
    queue_wait: Histogram = field(default_factory=Histogram)  # enqueue -> start, µs
    lost_ids: list[str] = field(default_factory=list)
    duplicated_ids: list[str] = field(default_factory=list)
    #: tasks finished in each second after ``start`` (the drain as a curve); empty without a start
    executed_per_second: list[int] = field(default_factory=list)
    start: float | None = None  # the load's start (wall clock), second 0 of executed_per_second
    corrupt: int = 0  # ledger rows that are not a valid record, left out of every other figure
    corrupt_ids: dict[str, str] = field(default_factory=dict)  # a sample: id -> what is wrong
    attempted: int = 0  # ids the driver sent: 2xx or not
    ok_once: int = 0  # 2xx, ran exactly once (Jepsen's "ok")
    recovered: int = 0  # ran after a non-2xx or no answer (of the unacknowledged)
    unacknowledged_ids: list[str] = field(default_factory=list)
    refused: int = 0  # answered 409: the id was already submitted, this request enqueued nothing
    #: a user's task: accepted ids of which an execution raised (ran, so never lost; not ok either)
    failed: int = 0
    failed_types: dict[str, int] = field(default_factory=dict)  # the last exception type -> failed ids
    failed_ids: list[str] = field(default_factory=list)
    cpu: Histogram | None = None  # a user's task: CPU µs of each id's last execution (None: not measured)
    #: a user's task: accepted ids that started and never finished (Jepsen's "indeterminate"): it hangs, the
    #: library's time limit cut it, or its worker died mid-call; neither lost nor executed
    indeterminate: int = 0
    indeterminate_ids: list[str] = field(default_factory=list)
    #: when the first of them started (wall clock; None: there are none)
    indeterminate_since: float | None = None

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.corrupt == 0

    def to_model(self) -> AuditResult:
        return AuditResult.model_validate(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "executed": self.executed,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "extra_executions": self.extra_executions,
            "late": self.late,
            "unacknowledged": self.unacknowledged,
            "first_start": self.first_start,
            "last_finish": self.last_finish,
            "end_to_end_ms": self.end_to_end.summary(),
            "queue_wait_ms": self.queue_wait.summary(),
            "end_to_end_histogram": self.end_to_end.to_dict(),
            "lost_ids": self.lost_ids,
            "duplicated_ids": self.duplicated_ids,
            "executed_per_second": self.executed_per_second,
            "start": self.start,
            "corrupt": self.corrupt,
            "corrupt_ids": self.corrupt_ids,
            "failed": self.failed,
            "failed_types": self.failed_types,
            "failed_ids": self.failed_ids,
            "cpu_ms": self.cpu.summary() if self.cpu is not None and self.cpu.count else None,
            "indeterminate": self.indeterminate,
            "indeterminate_ids": self.indeterminate_ids,
            "indeterminate_since": self.indeterminate_since,
            "categories": self.categories(),
        }

    def categories(self) -> dict[str, Any]:
        """Jepsen's queue categories, counts and fractions of the attempted ids (see ``Categories``)."""
        base = max(1, self.attempted)
        counts = {"ok": self.ok_once, "lost": self.lost, "duplicated": self.duplicated,
                  "unexpected": self.unacknowledged, "failed": self.failed, "indeterminate": self.indeterminate}
        fractions = {f"{k}_frac": (v / base if self.attempted else 0.0) for k, v in counts.items()}
        return {"attempted": self.attempted, **counts, "recovered": self.recovered, **fractions,
                "unexpected_ids": self.unacknowledged_ids, "refused": self.refused}


def audit(
    accepted_ids: Iterable[str],
    counts: Mapping[Any, Any],
    times: Mapping[Any, Any],
    *,
    deadline: float | None = None,
    ignore_prefix: str | None = None,
    start: float | None = None,
    corrupt: Mapping[str, str] | None = None,
    failed_ids: Iterable[str] = (),
    refused_ids: Iterable[str] = (),
    outcomes: Outcomes | None = None,
) -> Audit:
    """Compare the ids the driver saw accepted with the ledger's records.

    ``counts`` and ``times`` may hold anything (as :meth:`Ledger.read` returns them, or raw): what
    is not a valid row is corrupt, as are the ids of ``corrupt`` (:attr:`Rows.corrupt`). A corrupt
    id is neither executed, lost nor duplicated. ``ignore_prefix`` leaves out ids of another phase
    (the warm-up) on every side. ``failed_ids`` are the ids the driver sent and got a non-2xx or no
    answer for: with the accepted ones, the attempted ids of Jepsen's categories. ``refused_ids`` got a
    409 (the id was already submitted in the run): a definite answer, so an id of them that ran is
    not *recovered* (its first submission ran it), and they are counted as ``refused``. ``start`` (the
    load's start, wall clock) gives ``executed_per_second``: finishes counted per second after it.
    ``outcomes`` (a user's task, :meth:`Ledger.outcomes`): the accepted ids of which an execution raised
    are *failed* (by their last exception type) and not *ok*; the CPU times make ``cpu``; an accepted id with a
    start record and no execution is *indeterminate* (started, never finished), not *lost*.
    """
    rows = sort_rows(counts, times)
    bad = {**rows.corrupt, **(corrupt or {})}
    accepted = set(accepted_ids)
    counts = rows.counts
    if ignore_prefix:
        accepted = {t for t in accepted if not t.startswith(ignore_prefix)}
        counts = {t: n for t, n in counts.items() if not t.startswith(ignore_prefix)}
        bad = {t: why for t, why in bad.items() if not t.startswith(ignore_prefix)}
    refused = set(refused_ids) - accepted
    failed = set(failed_ids) - accepted - refused
    if ignore_prefix:
        failed = {t for t in failed if not t.startswith(ignore_prefix)}
        refused = {t for t in refused if not t.startswith(ignore_prefix)}
    attempted = len(accepted | failed | refused)
    accepted -= bad.keys()
    lost = sorted(accepted.difference(counts))
    started = outcomes.started if outcomes is not None else {}
    indeterminate = [t for t in lost if t in started]
    if indeterminate:
        lost = [t for t in lost if t not in started]
    stray = sorted(t for t in counts if t not in accepted)
    dups = sorted(t for t, n in counts.items() if n > 1)
    result = Audit(
        accepted=len(accepted),
        executed=len(accepted) - len(lost) - len(indeterminate),
        lost=len(lost),
        duplicated=len(dups),
        extra_executions=sum(counts[t] - 1 for t in dups),
        late=0,
        unacknowledged=len(stray),
        first_start=None,
        last_finish=None,
        lost_ids=lost[:SAMPLE],
        duplicated_ids=dups[:SAMPLE],
        corrupt=len(bad),
        corrupt_ids={t: bad[t] for t in sorted(bad)[:SAMPLE]},
        attempted=attempted,
        ok_once=sum(1 for t in accepted if counts.get(t) == 1 and not (outcomes and t in outcomes.failed)),
        recovered=sum(1 for t in stray if t in failed),
        unacknowledged_ids=stray[:SAMPLE],
        refused=len(refused),
        indeterminate=len(indeterminate),
        indeterminate_ids=indeterminate[:SAMPLE],
        indeterminate_since=min((started[t] for t in indeterminate), default=None),
    )
    if outcomes is not None:
        _outcomes(result, outcomes, accepted, counts)
    _timings(result, _rows(counts, rows.times), deadline=deadline, start=start)
    return result


def _timings(result: Audit, rows: Iterable[tuple[float, float, float]], *, deadline: float | None,
             start: float | None) -> None:
    """The histograms, the late count, the first start and last finish, and the finishes per second."""
    starts: list[float] = []
    finishes: list[float] = []
    for enq, began, fin in rows:
        starts.append(began)
        finishes.append(fin)
        result.end_to_end.record(max(0, round((fin - enq) * 1e6)))
        result.queue_wait.record(max(0, round((began - enq) * 1e6)))
        if deadline is not None and fin > deadline:
            result.late += 1
    if starts:
        result.first_start = min(starts)
        result.last_finish = max(finishes)
    if start is not None:
        result.start = start
        result.executed_per_second = per_second(finishes, start)


def _outcomes(result: Audit, outcomes: Outcomes, accepted: set[str], counts: Mapping[str, int]) -> None:
    """The failed ids (accepted ones that ran) by exception type, and the CPU time per execution."""
    failed = sorted(t for t in outcomes.failed if t in accepted and t in counts)
    result.failed = len(failed)
    result.failed_ids = failed[:SAMPLE]
    types: dict[str, int] = {}
    for task_id in failed:
        kind = outcomes.failed[task_id][1]
        types[kind] = types.get(kind, 0) + 1
    result.failed_types = dict(sorted(types.items(), key=lambda item: (-item[1], item[0])))
    cpu = Histogram()
    for task_id, seconds in outcomes.cpu_s.items():
        if task_id in counts:
            cpu.record(max(0, round(seconds * 1e6)))
    result.cpu = cpu


def per_second(stamps: list[float], start: float) -> list[int]:
    """How many of ``stamps`` fall in each second after ``start`` (earlier ones count in second 0)."""
    if not stamps:
        return []
    bins = [0] * (int(max(0.0, max(stamps) - start)) + 1)
    for stamp in stamps:
        bins[int(max(0.0, stamp - start))] += 1
    return bins


def _rows(
    counts: dict[str, int], times: dict[str, tuple[float, float, float]]
) -> Iterator[tuple[float, float, float]]:
    for task_id in counts:
        row = times.get(task_id)
        if row is not None:
            yield row
