"""A soak's sampler: every ``interval`` seconds, on a thread of the harness, the memory and CPU of each
process that runs tasks, the broker's memory and key count, and the backlog, into bounded series.

- **Processes** (``mem:<name>`` MB, ``cpu:<name>`` %, ``tasks_mb`` their sum): each worker (or the API
  of ``background``) with all its descendants, as :mod:`taskbench.harness.processes.rss` reads them
  (PSS, so a forking worker's shared pages count once); CPU is the tree's CPU seconds between two samples
  over the seconds between them (100 % is one core). A restarted worker's first sample has no CPU figure.
- **Broker** (``broker_mb``, ``broker_keys``): a Redis broker's ``INFO memory`` ``used_memory`` and
  ``DBSIZE`` (its own server by default; a shared one also holds the ledger, which grows with every task:
  the source says so); PostgreSQL's run schema: its tables' total size and live rows. RabbitMQ and NATS
  have no cheap reading here (their management APIs are not started): no broker series.
- **Backlog** (``backlog``): tasks the API's backend took (its enqueue histogram's count on ``/metrics``)
  that the ledger has not seen run (warm-up included on both sides).

A probe that fails (a broker restarting, a process gone between the listing and the read) gives no
sample that time: a missing point, never a zero.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from taskbench.harness.processes.rss import MB, usage
from taskbench.harness.soak.series import Downsampled

Probe = Callable[[], dict[str, float | None]]

UNITS = {"tasks_mb": "MB", "broker_mb": "MB", "broker_keys": "keys", "backlog": "tasks",
         "e2e_p50_ms": "ms", "e2e_p95_ms": "ms"}


def unit_of(name: str) -> str:
    if name.startswith("mem:"):
        return "MB"
    if name.startswith("cpu:"):
        return "%"
    return UNITS.get(name, "")


def redis_broker(client: Any) -> Probe:
    """The broker Redis's memory (MB) and key count."""

    def probe() -> dict[str, float | None]:
        memory = client.info("memory")
        return {"broker_mb": int(memory["used_memory"]) / MB, "broker_keys": float(client.dbsize())}

    return probe


_PG_SIZE = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p')")
_PG_ROWS = "SELECT coalesce(sum(n_live_tup), 0) FROM pg_stat_user_tables WHERE schemaname = %s"


class PostgresBroker:
    """The run schema's tables on the broker PostgreSQL: total size (MB, indexes and TOAST included) and
    live rows (the statistics collector's count), over one connection of its own (closed by :meth:`close`)."""

    def __init__(self, url: str, schema: str) -> None:
        self.url = url
        self.schema = schema
        self._conn: Any = None

    def __call__(self) -> dict[str, float | None]:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
        size = self._conn.execute(_PG_SIZE, (self.schema,)).fetchone()
        rows = self._conn.execute(_PG_ROWS, (self.schema,)).fetchone()
        return {"broker_mb": float(size[0]) / MB if size else None, "broker_keys": float(rows[0]) if rows else None}

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()


_ENQUEUED = "taskbench_enqueue_duration_seconds_count"


def enqueued(exposition: str) -> float:
    """Tasks the API's backend took (the enqueue histogram's count, every label) in a /metrics text."""
    total = 0.0
    for line in exposition.splitlines():
        if line.startswith(_ENQUEUED):
            total += float(line.rsplit(" ", 1)[1])
    return total


def backlog(metrics_url: str, client: Any, count_key: str) -> Probe:
    """Tasks the API enqueued (its /metrics) that the ledger has not seen run (one HLEN)."""

    def probe() -> dict[str, float | None]:
        with urllib.request.urlopen(metrics_url, timeout=2.0) as resp:  # noqa: S310 - the case's loopback API
            taken = enqueued(resp.read().decode())
        return {"backlog": float(max(0, round(taken) - int(client.hlen(count_key))))}

    return probe


class SoakSampler:
    """Samples ``pids()`` (name -> the current pid of each process that runs tasks) and ``probes`` every
    ``interval`` s from :meth:`start` until :meth:`stop`; ``t0`` is the wall-clock zero of the series."""

    def __init__(self, pids: Callable[[], dict[str, int]], probes: list[Probe], *, t0: float,
                 interval: float = 1.0, max_points: int = 720) -> None:
        self._pids = pids
        self._probes = probes
        self.t0 = t0
        self.interval = interval
        self.series = Downsampled(max_points, interval)
        self.names: list[str] = []
        self._last_cpu: dict[str, tuple[int, float, float]] = {}  # name -> (pid, cpu s, wall)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        now = time.time()
        values: dict[str, float | None] = {}
        roots = self._pids()
        for name, found in usage(roots).items():
            if name not in self.names:
                self.names.append(name)
            values[f"mem:{name}"] = found.pss / MB if found.pss else None
            pid = roots[name]
            last = self._last_cpu.get(name)
            cpu = None
            if last is not None and last[0] == pid and now > last[2] and found.cpu_s >= last[1]:
                cpu = 100 * (found.cpu_s - last[1]) / (now - last[2])
            values[f"cpu:{name}"] = cpu
            self._last_cpu[name] = (pid, found.cpu_s, now)
        present = [v for k, v in values.items() if k.startswith("mem:") and v is not None]
        values["tasks_mb"] = sum(present) if present else None
        for probe in self._probes:
            with contextlib.suppress(Exception):  # a figure beside the run: a failed reading is a missing one
                values.update(probe())
        with self._lock:
            self.series.add(now - self.t0, values)

    def _loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                self.sample()
            if self._stop.wait(self.interval):
                return

    def start(self) -> SoakSampler:
        self._thread = threading.Thread(target=self._loop, name="taskbench-soak", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for probe in self._probes:
            close = getattr(probe, "close", None)
            if close is not None:
                close()

    def points(self) -> tuple[list[float], dict[str, list[float | None]]]:
        with self._lock:
            return self.series.points()
