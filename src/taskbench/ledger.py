"""The per-task ledger: every execution is written to Redis under the run's prefix, then audited.

Layout (``P`` is the run prefix, ``taskbench:<run_id>:``):

* ``P ledger:n`` hash task id -> number of executions;
* ``P ledger:t`` hash task id -> ``"<enqueued_at> <started_at> <finished_at>"`` of the last one.

One pipelined round trip per task keeps the ledger's cost on a worker small. A run deletes only
keys under its own prefix; nothing here flushes a database.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from taskbench.histogram import Histogram
from taskbench.results.model import AuditResult

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis

SAMPLE = 20  # how many ids of each anomaly the audit lists


class Ledger:
    """Writes execution records for one run."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count_key = f"{prefix}ledger:n"
        self.times_key = f"{prefix}ledger:t"

    @staticmethod
    def _times(enqueued_at: float, started_at: float, finished_at: float) -> str:
        return f"{enqueued_at:.6f} {started_at:.6f} {finished_at:.6f}"

    async def record(
        self,
        client: aioredis.Redis,
        task_id: str,
        enqueued_at: float,
        started_at: float,
        finished_at: float,
    ) -> int:
        """Record one execution; returns how many times this task has run, this one included."""
        async with client.pipeline(transaction=False) as pipe:
            pipe.hincrby(self.count_key, task_id, 1)
            pipe.hset(self.times_key, task_id, self._times(enqueued_at, started_at, finished_at))
            count, _ = await pipe.execute()
        return int(count)

    def record_sync(
        self,
        client: redis.Redis,
        task_id: str,
        enqueued_at: float,
        started_at: float,
        finished_at: float,
    ) -> int:
        with client.pipeline(transaction=False) as pipe:
            pipe.hincrby(self.count_key, task_id, 1)
            pipe.hset(self.times_key, task_id, self._times(enqueued_at, started_at, finished_at))
            count, _ = pipe.execute()
        return int(count)

    def executed_count(self, client: redis.Redis) -> int:
        """Distinct task ids executed so far (cheap: one HLEN)."""
        return int(client.hlen(self.count_key))

    def unseen(self, client: redis.Redis, task_ids: list[str], batch: int = 10_000) -> list[str]:
        """Those of ``task_ids`` the ledger has not seen executed (HMGET in batches)."""
        absent: list[str] = []
        for i in range(0, len(task_ids), batch):
            chunk = task_ids[i:i + batch]
            absent += [t for t, v in zip(chunk, client.hmget(self.count_key, chunk), strict=True) if v is None]
        return absent

    def read(self, client: redis.Redis) -> tuple[dict[str, int], dict[str, tuple[float, ...]]]:
        counts = {_s(k): int(v) for k, v in client.hscan_iter(self.count_key, count=10_000)}
        times = {
            _s(k): tuple(float(x) for x in _s(v).split())
            for k, v in client.hscan_iter(self.times_key, count=10_000)
        }
        return counts, times


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(kw_only=True)
class Audit:
    """What happened to the accepted tasks of one case."""

    accepted: int
    executed: int  # accepted tasks that ran at least once
    lost: int  # accepted, never ran
    duplicated: int  # ran more than once (any task id)
    extra_executions: int  # executions beyond the first, summed
    late: int  # finished after the drain deadline
    unacknowledged: int  # ran, but the driver saw no 2xx for it
    first_start: float | None
    last_finish: float | None
    end_to_end: Histogram = field(default_factory=Histogram)  # enqueue -> finish, µs
    queue_wait: Histogram = field(default_factory=Histogram)  # enqueue -> start, µs
    lost_ids: list[str] = field(default_factory=list)
    duplicated_ids: list[str] = field(default_factory=list)
    #: tasks finished in each second after ``start`` (the drain as a curve); empty without a start
    executed_per_second: list[int] = field(default_factory=list)
    start: float | None = None  # the load's start (wall clock), second 0 of executed_per_second

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0

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
        }


def audit(
    accepted_ids: Iterable[str],
    counts: dict[str, int],
    times: dict[str, tuple[float, ...]],
    *,
    deadline: float | None = None,
    ignore_prefix: str | None = None,
    start: float | None = None,
) -> Audit:
    """Compare the ids the driver saw accepted with the ledger's records.

    ``ignore_prefix`` leaves out ids of another phase (the warm-up) on both sides. ``start`` (the
    load's start, wall clock) gives ``executed_per_second``: finishes counted per second after it.
    """
    accepted = set(accepted_ids)
    if ignore_prefix:
        accepted = {t for t in accepted if not t.startswith(ignore_prefix)}
        counts = {t: n for t, n in counts.items() if not t.startswith(ignore_prefix)}
    lost = sorted(accepted.difference(counts))
    dups = sorted(t for t, n in counts.items() if n > 1)
    result = Audit(
        accepted=len(accepted),
        executed=len(accepted) - len(lost),
        lost=len(lost),
        duplicated=len(dups),
        extra_executions=sum(counts[t] - 1 for t in dups),
        late=0,
        unacknowledged=sum(1 for t in counts if t not in accepted),
        first_start=None,
        last_finish=None,
        lost_ids=lost[:SAMPLE],
        duplicated_ids=dups[:SAMPLE],
    )
    starts: list[float] = []
    finishes: list[float] = []
    for enq, began, fin in _rows(counts, times):
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
    return result


def per_second(stamps: list[float], start: float) -> list[int]:
    """How many of ``stamps`` fall in each second after ``start`` (earlier ones count in second 0)."""
    if not stamps:
        return []
    bins = [0] * (int(max(0.0, max(stamps) - start)) + 1)
    for stamp in stamps:
        bins[int(max(0.0, stamp - start))] += 1
    return bins


def _rows(
    counts: dict[str, int], times: dict[str, tuple[float, ...]]
) -> Iterator[tuple[float, float, float]]:
    for task_id in counts:
        row = times.get(task_id)
        if row is not None and len(row) == 3:
            yield row[0], row[1], row[2]
