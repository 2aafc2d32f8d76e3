"""Per-process load engine: closed, ramp and open models over :class:`Conn` links.

The hot path is callback-driven: a response arriving in ``Conn.data_received``
calls :meth:`Engine.on_response`, which records it and writes the next request
on the same connection, with no task switch, future or timer per request.
Coroutines are only used for connecting (rare) and for the run's lifecycle.
"""

from __future__ import annotations

import asyncio
import string
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

from taskbench.driver.arrivals import Stretch, stretches
from taskbench.driver.conn import Conn
from taskbench.driver.load_spec import LoadSpec, RequestTemplate
from taskbench.driver.result import LoadResult, StageResult
from taskbench.histogram import Histogram

_RECONNECT_BACKOFF_S = 0.01  # keeps a refused port from becoming a busy loop
_LATE_S = 0.01  # open model: dispatch this much after schedule counts as late
_TICK_S = 0.001  # open model: scheduler granularity


@dataclass(frozen=True)
class _Steady:
    """An open-model load at one rate (no schedule): one stretch that lasts the load's bound."""

    duration: float
    rate: float
    id_prefix: str = ""


class Engine:
    """Runs one process's share of a load spec in the current event loop."""

    def __init__(self, template: RequestTemplate, spec: LoadSpec, index: int = 0) -> None:
        self.template = template
        self.spec = spec
        self.id_prefix = f"{spec.id_prefix}{index}-"
        self.limit = spec.requests if spec.requests is not None else 1 << 62
        self.timeout = spec.timeout
        self._head = template.head_start()
        self._body = template.body
        self._lines = template.header_lines()  # per-request header lines (the task reference), a template
        fields = {f for _, f, _, _ in string.Formatter().parse((template.body or "") + self._lines) if f}
        self._static: bytes | None = None
        if not fields:
            self._static = self._encode((template.body or "").format(), self._lines.format())
        self.conns: set[Conn] = set()
        self.issued = 0
        self.inflight = 0
        self.active = 0  # connected users (closed/ramp) or open connections (open)
        self.stopping = False
        self.res = LoadResult(model=spec.model)
        self.hist: Histogram = self.res.latency
        self.rows: list[list[int]] = []
        self.t0 = perf_counter()
        # open model state
        self.idle: list[Conn] = []
        self.backlog: deque[tuple[int, float, str, int]] = deque()  # seq, intended, id prefix, stage
        self.connecting = 0
        # a rate schedule: each stage's counts
        self.res.stages = [StageResult() for _ in spec.schedule]
        #: called once, when this engine reserves its last request (engines run together stop together)
        self.at_limit: Callable[[], None] | None = None

    # -- request building ------------------------------------------------------
    def _encode(self, body: str, lines: str = "") -> bytes:
        raw = body.encode()
        return b"".join((self._head, lines.encode("latin-1"), b"Content-Length: ", str(len(raw)).encode(),
                         b"\r\n\r\n", raw))

    def _request(self, seq: int, prefix: str = "") -> tuple[str, bytes]:
        tid = prefix + self.id_prefix + str(seq)
        if self._static is not None:
            return tid, self._static
        sent = f"{time.time():.6f}"
        body = self._body.format(task_id=tid, enqueued_at=sent) if self._body else ""
        return tid, self._encode(body, self._lines.format(task_id=tid, enqueued_at=sent) if self._lines else "")

    def _take(self) -> int | None:
        """Reserve the next request sequence number, or None once the bound is hit."""
        if self.stopping or self.issued >= self.limit:
            return None
        seq = self.issued
        self.issued += 1
        if self.issued == self.limit and self.at_limit is not None:
            self.at_limit()
        if not self.res.first_send:
            self.res.first_send = perf_counter()
        return seq

    def _send(self, conn: Conn, seq: int, t_start: float | None = None, prefix: str = "", stage: int = -1) -> None:
        tid, data = self._request(seq, prefix)
        now = perf_counter()
        self.inflight += 1
        # Latency counts from the intended send when that has passed (open model),
        # else from now (closed model, or an open-model arrival sent a bit early).
        start = now if t_start is None or t_start > now else t_start
        conn.send(tid, data, start, now + self.timeout)
        conn.stage = stage

    # -- accounting ------------------------------------------------------------
    def _row(self, now: float) -> list[int]:
        sec = int(now - self.t0)
        rows = self.rows
        while len(rows) <= sec:
            rows.append([0, 0, 0, self.active])
        row = rows[sec]
        if self.active > row[3]:
            row[3] = self.active
        return row

    def _error(self, tid: str, kind: str, now: float, index: int = -1) -> None:
        stage = self.res.stages[index] if index >= 0 else None
        if stage is not None:
            stage.errors += 1
        res = self.res
        res.errors[kind] = res.errors.get(kind, 0) + 1
        res.failed_ids[tid] = kind
        res.last_response = now
        self._row(now)[2] += 1

    def on_response(self, conn: Conn, status: int) -> None:
        now = perf_counter()
        tid = conn.task_id
        assert tid is not None
        conn.task_id = None
        self.inflight -= 1
        res = self.res
        micros = int((now - conn.t_start) * 1e6)
        self.hist.record(micros)
        res.completed += 1
        res.last_response = now
        stage = self.res.stages[conn.stage] if conn.stage >= 0 else None
        if stage is not None:
            stage.completed += 1
            stage.latency.record(micros)
        if 200 <= status < 300:
            res.ok += 1
            if stage is not None:
                stage.ok += 1
            res.accepted_ids.append(tid)
            row = self._row(now)
            row[0] += 1
            row[1] += 1
        else:
            self._row(now)[0] += 1
            self._error(tid, f"http_{status}", now, conn.stage)
        if conn.close_after or not self.spec.keepalive:  # no keep-alive: the user connects anew (ab without -k)
            conn.close()
        elif self.spec.model == "open":
            self._free(conn)
        elif self.spec.pace and now < conn.t_start + self.spec.pace:
            # paced user: the next request starts PACE after this one started
            asyncio.get_running_loop().call_later(conn.t_start + self.spec.pace - now, self._paced, conn)
        else:
            self._next(conn)

    def on_failure(self, conn: Conn, kind: str) -> None:
        tid = conn.task_id
        assert tid is not None
        conn.task_id = None
        self.inflight -= 1
        self._error(tid, kind, perf_counter(), conn.stage)

    def on_lost(self, conn: Conn) -> None:
        self.conns.discard(conn)
        if self.spec.model == "open":
            self.active -= 1
            if conn in self.idle:
                self.idle.remove(conn)
            self._ensure_conns()

    async def _connect(self) -> Conn | None:
        loop = asyncio.get_running_loop()
        t = self.template
        try:
            async with asyncio.timeout(self.timeout):
                _, conn = await loop.create_connection(
                    lambda: Conn(self), t.connect_host, t.port
                )
        except (OSError, TimeoutError):
            return None
        self.conns.add(conn)
        return conn

    async def _sweep(self) -> None:
        """Time out requests past their deadline; cheaper than a timer per request."""
        interval = min(0.05, self.timeout / 10)
        while True:
            await asyncio.sleep(interval)
            now = perf_counter()
            for conn in [c for c in self.conns if c.task_id is not None and c.deadline < now]:
                conn.fail("timeout")

    # -- closed / ramp ---------------------------------------------------------
    def _next(self, conn: Conn) -> None:
        seq = self._take()
        if seq is None:
            conn.close()
        else:
            self._send(conn, seq)

    def _paced(self, conn: Conn) -> None:
        if conn.closed:  # the server closed it while the user waited; the user reconnects
            return
        if self.stopping:
            conn.close()
            return
        self._next(conn)

    async def _user(self) -> None:
        while not self.stopping and self.issued < self.limit:
            conn = await self._connect()
            if conn is None:
                seq = self._take()
                if seq is None:
                    break
                self._error(self.id_prefix + str(seq), "connect", perf_counter())
                await asyncio.sleep(_RECONNECT_BACKOFF_S)
                continue
            conn.done = asyncio.get_running_loop().create_future()
            self.active += 1
            self._next(conn)
            await conn.done
            self.active -= 1

    async def _run_users(self) -> None:
        users: list[asyncio.Task[None]] = []
        delay = 1.0 / self.spec.ramp_per_s if self.spec.model == "ramp" else 0.0
        for i in range(self.spec.users):
            if self.stopping or self.issued >= self.limit:
                break
            if delay and i:
                await asyncio.sleep(delay)
            users.append(asyncio.create_task(self._user()))
        # Users end on their own once the bound is hit and their in-flight request
        # is answered or times out (the sweeper enforces that); the deadline below
        # only guards against a bug leaving a user stuck.
        pending = set(users)
        drain_until: float | None = None
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.05)
            if drain_until is None and (self.stopping or self.issued >= self.limit):
                drain_until = perf_counter() + self.timeout + 1.0
            if drain_until is not None and perf_counter() > drain_until:
                break
        for u in pending:
            u.cancel()
        await asyncio.gather(*users, return_exceptions=True)

    # -- open ------------------------------------------------------------------
    def _free(self, conn: Conn) -> None:
        if self.backlog:
            seq, intended, prefix, stage = self.backlog.popleft()
            self._send(conn, seq, intended, prefix, stage)
        else:
            self.idle.append(conn)

    def _ensure_conns(self) -> None:
        """Open connections while arrivals wait and the connection cap allows."""
        want = min(len(self.backlog), self.spec.users - self.active) - self.connecting
        for _ in range(max(0, want)):
            self.connecting += 1
            asyncio.get_running_loop().create_task(self._open_conn())

    async def _open_conn(self) -> None:
        conn = await self._connect()
        self.connecting -= 1
        if conn is None:
            if self.backlog:
                seq, _, prefix, stage = self.backlog.popleft()
                self._error(prefix + self.id_prefix + str(seq), "connect", perf_counter(), stage)
            await asyncio.sleep(_RECONNECT_BACKOFF_S)
            self._ensure_conns()
            return
        self.active += 1
        self._free(conn)

    def _dispatch(self, intended: float, now: float, prefix: str = "", index: int = -1) -> bool:
        seq = self._take()
        if seq is None:
            return False
        self.res.intended += 1
        late = now - intended > _LATE_S
        if late:
            self.res.late += 1
        if index >= 0:
            self.res.stages[index].intended += 1
            self.res.stages[index].late += late
        if self.idle:
            self._send(self.idle.pop(), seq, intended, prefix, index)
        else:
            self.backlog.append((seq, intended, prefix, index))
            self._ensure_conns()
        return True

    def _stretches(self) -> list[Stretch]:
        """This engine's arrivals: its share of one schedule across the stages (:mod:`.arrivals`), or of
        the one rate until the load's bound. Each stage sends its count of them, even when a late wake-up
        of the loop runs past the stage's end or the stop's timer (a busy machine once sent 142 requests
        for 4 s at 20, 10 and 5 per second)."""
        if self.spec.schedule:
            return stretches(self.spec.schedule, self.spec.share)
        assert self.spec.rate is not None
        return stretches([_Steady(self.spec.max_duration, self.spec.rate)], self.spec.share)

    async def _run_open(self) -> None:
        start = perf_counter()
        for stretch in self._stretches():
            stage = stretch.stage if self.spec.schedule else -1
            n = stretch.first
            while not self.stopping and self.issued < self.limit and n < stretch.end:
                now = perf_counter()
                # Issue every arrival that is due; if the loop woke late they all go
                # now, stamped with their intended times (so their latency shows it).
                # Arrivals due within half a tick go now rather than a whole tick late;
                # those are timed from their actual send (see _dispatch).
                horizon = now + _TICK_S / 2
                due = start + stretch.due(n)
                while n < stretch.end and due <= horizon and self._dispatch(due, now, stretch.id_prefix, stage):
                    n += stretch.step
                    due = start + stretch.due(n)
                if n >= stretch.end:
                    break
                # Sleep at least one tick: event-loop timers have ~1 ms resolution and a
                # shorter sleep degenerates into a busy loop. Arrivals due meanwhile go
                # out in a batch at wake-up, still timed from their intended send. At most 50 ms:
                # a stop (the parent's) is seen within it, even across a long pause at rate 0.
                await asyncio.sleep(min(0.05, max(_TICK_S, due - perf_counter())))
        # a schedule lasts its stages (a last one at rate 0 is a pause the load keeps)
        until = start + self.spec.scheduled_s
        while self.spec.schedule and not self.stopping and perf_counter() < until:  # noqa: ASYNC110 - a timed wait
            await asyncio.sleep(min(0.05, max(_TICK_S, until - perf_counter())))
        drain_until = perf_counter() + self.timeout
        # Polling is fine here: the drain runs once, is short and is bounded.
        while (self.backlog or self.inflight) and perf_counter() < drain_until:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        self.res.unsent = len(self.backlog)
        self.backlog.clear()

    # -- lifecycle -------------------------------------------------------------
    def stop(self) -> None:
        """Issue no further request; those in flight are still answered (or time out)."""
        self.stopping = True

    async def run(self) -> LoadResult:
        """Run to the spec's bound; returns this process's (unfinalized) result."""
        loop = asyncio.get_running_loop()
        self.t0 = perf_counter()
        # the open model's arrivals end at their own bound (its stages', or the duration from its start): the
        # stop is a backstop that never cuts the last ones short, even when the loop wakes late past it
        open_model = bool(self.spec.schedule) or self.spec.model == "open"
        stopper = loop.call_later(self.spec.max_duration + (1.0 if open_model else 0.0), self.stop)
        sweeper = loop.create_task(self._sweep())
        try:
            if self.spec.model == "open":
                await self._run_open()
            else:
                await self._run_users()
        finally:
            stopper.cancel()
            sweeper.cancel()
            for conn in list(self.conns):
                conn.fail("timeout")  # anything still in flight after the grace period
            for _ in range(3):
                await asyncio.sleep(0)  # let connection_lost callbacks run
        res = self.res
        res.requests = self.issued
        res.per_second = [
            {"t": i, "completed": r[0], "ok": r[1], "errors": r[2], "users": r[3]}
            for i, r in enumerate(self.rows)
        ]
        return res
