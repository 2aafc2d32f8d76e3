"""The per-task ledger: every execution is written to Redis under the run's prefix, then audited.

Layout (``P`` is the run prefix, ``taskbench:<run_id>:``):

* ``P ledger:n`` hash task id -> number of executions;
* ``P ledger:t`` hash task id -> ``"<enqueued_at> <started_at> <finished_at>"`` of the last one.

One round trip per task keeps the ledger's cost on a worker small: a Lua script (:data:`RECORD`)
increments the count, writes the times and, for a task whose body ends with an INCRBY (io/simple,
cpu/*), does that INCRBY too. A script runs atomically, so a worker killed at any moment leaves
either the task's effect and its record, or neither: the audit never sees one without the other. A run deletes only
keys under its own prefix; nothing here flushes a database.

Reading and auditing never raise on what the ledger holds: a count that is not a positive integer,
a time row that is not three finite, plausible unix times, a key that is not a task id, a row of one
hash without its row in the other, or a ledger key of the wrong type is *corrupt*. The audit leaves a
corrupt id out of every other figure, counts it, lists a sample with what is wrong, and a run with
any corrupt row is not ok: its proof is damaged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import NoScriptError

from taskbench.histogram import Histogram
from taskbench.ledger_rows import Rows, sort_rows
from taskbench.results.model import AuditResult

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis

SAMPLE = 20  # how many ids of each anomaly the audit lists
#: the key under which a ledger hash that cannot be read is reported
WHOLE_HASH = "*"
#: KEYS: count hash, times hash[, the task's counter]; ARGV: task id, times[, the task's increment]
RECORD: Final = """
if KEYS[3] then redis.call('INCRBY', KEYS[3], ARGV[3]) end
local runs = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return runs
"""


#: the script's SHA1, as EVALSHA names it
RECORD_SHA: Final = hashlib.sha1(RECORD.encode(), usedforsecurity=False).hexdigest()


class Ledger:
    """Writes execution records for one run."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count_key = f"{prefix}ledger:n"
        self.times_key = f"{prefix}ledger:t"
        # the sync path's script, registered on first use with the client that runs it (EVALSHA; redis-py
        # loads it when missing); the async path calls EVALSHA itself
        self._sync_script: Any = None

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
        *,
        incr: tuple[str, int] | None = None,
    ) -> int:
        """Record one execution; returns how many times this task has run, this one included.

        ``incr`` = (key, amount): the task's own INCRBY, done by the same script, so that a task's
        effect and its record reach Redis in one round trip and together or not at all.
        """
        times = f"{enqueued_at:.6f} {started_at:.6f} {finished_at:.6f}"
        # EVALSHA straight from here, not through redis-py's Script object (which imports, checks for a
        # pipeline and copies its arguments on every call): this is the worker's per-task hot path
        if incr:
            keys_args: tuple[str | int, ...] = (self.count_key, self.times_key, incr[0], task_id, times, incr[1])
        else:
            keys_args = (self.count_key, self.times_key, task_id, times)
        numkeys = 3 if incr else 2
        try:
            count = await client.evalsha(RECORD_SHA, numkeys, *keys_args)
        except NoScriptError:  # a Redis that has not seen the script yet (or was restarted empty)
            await client.script_load(RECORD)
            count = await client.evalsha(RECORD_SHA, numkeys, *keys_args)
        return int(count)

    def record_sync(
        self,
        client: redis.Redis,
        task_id: str,
        enqueued_at: float,
        started_at: float,
        finished_at: float,
        *,
        incr: tuple[str, int] | None = None,
    ) -> int:
        script = self._sync_script
        if script is None:
            script = self._sync_script = client.register_script(RECORD)
        count = script(keys=self._keys(incr), args=self._args(task_id, enqueued_at, started_at, finished_at, incr),
                       client=client)
        return int(count)

    def _keys(self, incr: tuple[str, int] | None) -> list[str]:
        return [self.count_key, self.times_key, incr[0]] if incr else [self.count_key, self.times_key]

    def _args(self, task_id: str, enqueued_at: float, started_at: float, finished_at: float,
              incr: tuple[str, int] | None) -> list[str | int]:
        times = self._times(enqueued_at, started_at, finished_at)
        return [task_id, times, incr[1]] if incr else [task_id, times]

    def executed_count(self, client: redis.Redis) -> int:
        """Distinct task ids executed so far (cheap: one HLEN)."""
        return int(client.hlen(self.count_key))

    def executions_total(self, client: redis.Redis) -> int:
        """Executions so far, every run of a task counted (one HVALS; a value that is not a count is left
        out here, the audit reports it)."""
        values = (v.decode() if isinstance(v, bytes) else str(v) for v in client.hvals(self.count_key))
        return sum(int(v) for v in values if v.isdigit())

    def unseen(self, client: redis.Redis, task_ids: list[str], batch: int = 10_000) -> list[str]:
        """Those of ``task_ids`` the ledger has not seen executed (HMGET in batches)."""
        absent: list[str] = []
        for i in range(0, len(task_ids), batch):
            chunk = task_ids[i:i + batch]
            absent += [t for t, v in zip(chunk, client.hmget(self.count_key, chunk), strict=True) if v is None]
        return absent

    def rows(self, client: redis.Redis) -> Rows:
        """Everything the ledger holds, sorted into valid rows and corrupt ones (never raises on content)."""
        raw_counts, corrupt = self._hash(client, self.count_key)
        raw_times, corrupt_times = self._hash(client, self.times_key)
        found = sort_rows(raw_counts, raw_times)
        found.corrupt.update(corrupt)
        found.corrupt.update(corrupt_times)
        return found

    def read(self, client: redis.Redis) -> tuple[dict[str, int], dict[str, tuple[float, ...]]]:
        """The valid rows only: counts by id, (enqueued, started, finished) by id."""
        found = self.rows(client)
        return found.counts, dict(found.times)

    @staticmethod
    def _hash(client: redis.Redis, key: str) -> tuple[dict[Any, Any], dict[str, str]]:
        import redis as redis_lib

        try:
            return dict(client.hscan_iter(key, count=10_000)), {}
        except redis_lib.ResponseError as exc:  # WRONGTYPE: someone wrote something else there
            return {}, {f"{WHOLE_HASH}{key}": f"unreadable: {exc}"}


@dataclass(kw_only=True)
class Audit:
    """What happened to the accepted tasks of one case."""

    accepted: int
    executed: int  # accepted tasks that ran at least once
    lost: int  # accepted, never ran
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
            "categories": self.categories(),
        }

    def categories(self) -> dict[str, Any]:
        """Jepsen's queue categories, counts and fractions of the attempted ids (see ``Categories``)."""
        base = max(1, self.attempted)
        counts = {"ok": self.ok_once, "lost": self.lost, "duplicated": self.duplicated,
                  "unexpected": self.unacknowledged}
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
    stray = sorted(t for t in counts if t not in accepted)
    dups = sorted(t for t, n in counts.items() if n > 1)
    result = Audit(
        accepted=len(accepted),
        executed=len(accepted) - len(lost),
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
        ok_once=sum(1 for t in accepted if counts.get(t) == 1),
        recovered=sum(1 for t in stray if t in failed),
        unacknowledged_ids=stray[:SAMPLE],
        refused=len(refused),
    )
    starts: list[float] = []
    finishes: list[float] = []
    for enq, began, fin in _rows(counts, rows.times):
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
    counts: dict[str, int], times: dict[str, tuple[float, float, float]]
) -> Iterator[tuple[float, float, float]]:
    for task_id in counts:
        row = times.get(task_id)
        if row is not None:
            yield row
