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

**A user's task** (``--workload module:callable``, and a user's own service through taskbench's
instrumentation) records each execution with :data:`RECORD_EXECUTION` instead (:meth:`Ledger.record_execution`,
:meth:`Ledger.record_execution_sync`): the same count and times, plus two hashes of its own:

* ``P ledger:c`` hash task id -> CPU seconds of its last execution (``"%.6f"``; absent when not measured);
* ``P ledger:f`` hash task id -> ``"<failed executions> <exception type>"``, only for a task of which an
  execution raised (the type of the last exception, as :func:`failure_name` writes it).

* ``P ledger:s`` hash task id -> ``"<started_at>"`` of its last start, written before the call
  (:meth:`Ledger.record_start`): a task that started and never recorded its end (it hangs, the library's time
  limit cut it, its worker died mid-call) is *indeterminate*, not lost.

A call that raised is still an execution (it ran: never *lost*); the audit counts the accepted ids with a
row in ``ledger:f`` as **failed**, by exception type, and leaves them out of *ok*. Anyone may write these
rows with the script alone: ``EVALSHA <sha1 of RECORD_EXECUTION> 4 P:ledger:n P:ledger:t P:ledger:c
P:ledger:f <task id> "<enqueued> <started> <finished>" <cpu seconds or ""> <exception type or "">``.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import NoScriptError

from taskbench.ledger.rows import Outcomes, Rows, sort_rows

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis

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
#: one execution of a user's task (see the module's docstring). KEYS: count, times, cpu, failed hashes;
#: ARGV: task id, times, CPU seconds ("" if not measured), exception type ("" when the call returned)
RECORD_EXECUTION: Final = """
local runs = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], ARGV[3]) end
if ARGV[4] ~= '' then
  local before = redis.call('HGET', KEYS[4], ARGV[1])
  local failed = 1
  if before then failed = (tonumber(string.match(before, '^%d+')) or 0) + 1 end
  redis.call('HSET', KEYS[4], ARGV[1], failed .. ' ' .. ARGV[4])
end
return runs
"""
RECORD_EXECUTION_SHA: Final = hashlib.sha1(RECORD_EXECUTION.encode(), usedforsecurity=False).hexdigest()
#: what an exception type may look like in ``ledger:f`` (anything else is replaced by ``_``)
_TYPE_CHARS: Final = re.compile(r"[^A-Za-z0-9_.]")


def failure_name(exc: BaseException) -> str:
    """The exception's type as the ledger keeps it: ``ValueError``, ``httpx.ConnectError`` (the module
    but for builtins), at most 100 characters of ``[A-Za-z0-9_.]``."""
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return _TYPE_CHARS.sub("_", name)[:100] or "Exception"


class Ledger:
    """Writes execution records for one run."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count_key = f"{prefix}ledger:n"
        self.times_key = f"{prefix}ledger:t"
        self.cpu_key = f"{prefix}ledger:c"  # a user's task: CPU seconds of the last execution
        self.failed_key = f"{prefix}ledger:f"  # a user's task: "<failed executions> <exception type>"
        self.starts_key = f"{prefix}ledger:s"  # a user's task: when its last execution started
        # the sync path's script, registered on first use with the client that runs it (EVALSHA; redis-py
        # loads it when missing); the async path calls EVALSHA itself
        self._sync_script: Any = None
        self._sync_execution: Any = None

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

    def _execution(self, task_id: str, times: tuple[float, float, float], cpu_s: float | None,
                   error: str | None) -> tuple[list[str], list[str]]:
        keys = [self.count_key, self.times_key, self.cpu_key, self.failed_key]
        cpu = "" if cpu_s is None or not math.isfinite(cpu_s) else f"{max(0.0, cpu_s):.6f}"
        kind = "" if error is None else (_TYPE_CHARS.sub("_", error)[:100] or "Exception")
        return keys, [task_id, self._times(*times), cpu, kind]

    async def record_execution(self, client: aioredis.Redis, task_id: str, enqueued_at: float, started_at: float,
                               finished_at: float, *, cpu_s: float | None = None, error: str | None = None) -> int:
        """Record one execution of a user's task (:data:`RECORD_EXECUTION`); returns how many times this
        task has run, this one included.

        ``cpu_s``: the CPU seconds the call took (None: not measured). ``error``: the exception type of a
        call that raised (:func:`failure_name`), None for one that returned: the execution then counts as
        **failed** in the audit, never as lost. The count, the times, the CPU and the failure are written
        by one script, so they are in Redis together or not at all.
        """
        keys, args = self._execution(task_id, (enqueued_at, started_at, finished_at), cpu_s, error)
        try:
            count = await client.evalsha(RECORD_EXECUTION_SHA, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(RECORD_EXECUTION)
            count = await client.evalsha(RECORD_EXECUTION_SHA, len(keys), *keys, *args)
        return int(count)

    def record_execution_sync(self, client: redis.Redis, task_id: str, enqueued_at: float, started_at: float,
                              finished_at: float, *, cpu_s: float | None = None, error: str | None = None) -> int:
        """:meth:`record_execution` on a synchronous client (a forked child, a sync task)."""
        keys, args = self._execution(task_id, (enqueued_at, started_at, finished_at), cpu_s, error)
        script = self._sync_execution
        if script is None:
            script = self._sync_execution = client.register_script(RECORD_EXECUTION)
        return int(script(keys=keys, args=args, client=client))

    def start_command(self, task_id: str, started_at: float) -> tuple[str, str, str, str]:
        """The ``HSET`` of a start record (:meth:`record_start`), for a writer that sends it itself."""
        return ("HSET", self.starts_key, task_id, f"{started_at:.6f}")

    async def record_start(self, client: aioredis.Redis, task_id: str, started_at: float) -> None:
        """That an execution of a user's task started (before the call: a call that never ends leaves it)."""
        await client.hset(self.starts_key, task_id, f"{started_at:.6f}")

    def record_start_sync(self, client: redis.Redis, task_id: str, started_at: float) -> None:
        """:meth:`record_start` on a synchronous client (a forked child)."""
        client.hset(self.starts_key, task_id, f"{started_at:.6f}")

    def outcomes(self, client: redis.Redis) -> Outcomes:
        """The failed executions and CPU times of a user's task; a row that is not one is left out
        (never raises on content: the counts and times are the proof, these are figures beside it)."""
        found = Outcomes()
        failed, _ = self._hash(client, self.failed_key)
        for key, value in failed.items():
            text = (value.decode(errors="replace") if isinstance(value, bytes) else str(value)).split(" ", 1)
            if len(text) == 2 and text[0].isdigit() and int(text[0]) > 0:
                found.failed[_text(key)] = (int(text[0]), text[1])
        cpu, _ = self._hash(client, self.cpu_key)
        for key, value in cpu.items():
            try:
                seconds = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(seconds) and seconds >= 0:
                found.cpu_s[_text(key)] = seconds
        starts, _ = self._hash(client, self.starts_key)
        for key, value in starts.items():
            try:
                began = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(began) and began >= 0:
                found.started[_text(key)] = began
        return found

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


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


__all__ = ["RECORD", "RECORD_EXECUTION", "RECORD_EXECUTION_SHA", "RECORD_SHA", "Ledger", "failure_name"]
