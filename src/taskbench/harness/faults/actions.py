"""What each fault does to the running processes, on the injector's thread (see :mod:`.kinds`).

An action gets a :class:`~.context.FaultContext`: the case's processes, the broker, the fault's record
to fill in, and two events (the load ended; the run is being interrupted). Whatever an action stops or
pauses, it resumes in a ``finally``: an interrupted run leaves no frozen process and no paused
broker behind. Each action also records, in ``record.proof``, what it observed that shows the fault
really happened (the group's processes in state "stopped", a PING the broker did not answer).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator

import psutil

from taskbench.harness.brokers.redis import describe
from taskbench.harness.faults.context import Broker, FaultContext
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.procgroup import Managed
from taskbench.results import FaultRecord
from taskbench.wait import WaitTimeoutError, wait_until

__all__ = ["PROBE_S", "kill_and_restart", "pause_worker", "stall_broker", "stall_problem", "workers_paused"]

#: how long a probe PING waits for a stalled broker before it counts as "did not answer"
PROBE_S = 0.3


# -- kill, once or every P seconds -------------------------------------------------------------------


def kill_and_restart(ctx: FaultContext) -> None:
    """``kill-worker@T``, ``kill-api@T`` (once) and ``kill-worker@T/P`` (every P s until the load ends)."""
    target, period = ctx.fault.target, ctx.fault.period
    record = ctx.record
    first = time.time()
    record.injected, record.at = True, first
    n = 0
    while not ctx.cancel.is_set():
        killed_at = time.time()
        pid, code = ctx.procs.kill(target)
        n += 1
        record.kills.append(killed_at)
        if n == 1:
            record.killed_pid, record.killed_exit_code = pid, code
        record.proof.append(f"kill {n}: {target} (pid {pid}) exited with code {code}")
        new = ctx.procs.restart(target)
        record.restarted_pid = new.pid
        ctx.restarted(new)
        ready = _wait_ready(ctx, new)
        if ready is None:
            return
        record.restarts_ready_s.append(ready - killed_at)
        if n == 1:
            record.ready_after_s = ready - killed_at
        if period is None or not ctx.sleep_until(first + n * period, until_load_ends=True):
            return


def _wait_ready(ctx: FaultContext, new: Managed) -> float | None:
    """When the restarted process was ready; None if the run was interrupted first."""

    def gone() -> str | None:
        if ctx.cancel.is_set():
            return "cancelled"
        if not new.alive():
            return (f"the restarted {new.name} exited with code {new.exit_code()}; "
                    f"its log ({new.log_path}) ends:\n{new.tail()}")
        return None

    try:
        wait_until(lambda: ctx.ready(new), ctx.ready_timeout, interval=0.02, abort=gone,
                   what=f"the restarted {new.name} being ready")
    except WaitTimeoutError as exc:
        if not ctx.cancel.is_set():
            raise RuntimeError(str(exc)) from None
        return None
    return time.time()


# -- pause a worker ----------------------------------------------------------------------------------


def pause_worker(ctx: FaultContext) -> None:
    """``pause-worker@T+D``: SIGSTOP the worker's process group for D seconds, then SIGCONT."""
    proc = ctx.procs.get(ctx.fault.target)
    with _group_stopped(proc.pid, ctx.record, proc.name):
        ctx.sleep_until((ctx.record.at or time.time()) + (ctx.fault.duration or 0.0))


@contextlib.contextmanager
def workers_paused(procs: ProcessSet, record: FaultRecord) -> Iterator[list[str]]:
    """SIGSTOP every worker's process group (a ``pause-workers`` phase of ``--phases``: a deploy, a frozen
    node), SIGCONT them all on exit; yields the workers' names (none: the backend has no worker)."""
    workers = [p for p in procs.procs if p.name.startswith("worker") and p.alive()]
    with contextlib.ExitStack() as stack:
        for proc in workers:
            stack.enter_context(_group_stopped(proc.pid, record, proc.name))
        yield [p.name for p in workers]


@contextlib.contextmanager
def _group_stopped(pgid: int, record: FaultRecord, name: str) -> Iterator[None]:
    """SIGSTOP a process group (a worker and its pool children), SIGCONT it at the end."""
    members: list[int] = []
    with contextlib.suppress(psutil.Error):
        leader = psutil.Process(pgid)
        members = [p.pid for p in [leader, *leader.children(recursive=True)] if _pgid(p) == pgid]

    def send(sig: signal.Signals) -> None:
        os.killpg(pgid, sig)

    with _frozen(members, send, record, f"{name} (process group {pgid})"):
        yield


@contextlib.contextmanager
def _processes_stopped(pids: list[int], record: FaultRecord, name: str) -> Iterator[None]:
    """SIGSTOP every process of a server, its leader first (PostgreSQL's children are not in its group),
    SIGCONT them all at the end, the leader last."""
    def send(sig: signal.Signals) -> None:
        for pid in pids if sig == signal.SIGSTOP else reversed(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    with _frozen(pids, send, record, f"{name} (pid {pids[0]} and {len(pids) - 1} other(s))"):
        yield


@contextlib.contextmanager
def _frozen(pids: list[int], send: Callable[[signal.Signals], None], record: FaultRecord,
            name: str) -> Iterator[None]:
    """``send`` SIGSTOP, the fault is injected once the kernel shows ``pids`` stopped (a signal is delivered
    asynchronously: on a busy machine a look right after kill() can still see "running"), then SIGCONT."""
    send(signal.SIGSTOP)
    at = time.time()
    record.proof.append(f"{name}: {_count_stopped(pids)} of {len(pids)} process(es) in state stopped")
    record.injected, record.at = True, at
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            send(signal.SIGCONT)
        record.ended = time.time()
        record.proof.append(f"{name} continued (SIGCONT) after {record.ended - (record.at or record.ended):.2f} s")


def _count_stopped(pids: list[int]) -> int:
    """How many of ``pids`` the kernel shows as stopped (waits up to 1 s for all)."""
    def stopped() -> int:
        count = 0
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                count += psutil.Process(pid).status() == psutil.STATUS_STOPPED
        return count

    with contextlib.suppress(WaitTimeoutError):
        wait_until(lambda: stopped() == len(pids), 1.0, interval=0.01, what="the processes stopped")
    return stopped()


def _pgid(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except OSError:
        return None


# -- stall the broker --------------------------------------------------------------------------------


def stall_problem(broker: Broker | None) -> str | None:
    """Why ``stall-broker`` cannot be done on this broker (None: it can)."""
    if broker is None:
        return "stall-broker: the case has no broker"
    if broker.facts.pauses_itself or broker.owned() is not None:
        return None
    return (f"stall-broker: the {broker.describe()} is a server the harness did not start, and "
            f"{broker.kind} has no command to pause itself: stalling it would mean freezing a process "
            "taskbench does not own. Leave out --broker-url: the harness then starts a private server for the run")


def stall_broker(ctx: FaultContext) -> None:
    """``stall-broker@T+D``: CLIENT PAUSE <D ms> ALL on Redis; SIGSTOP of a server the harness owns."""
    broker, record = ctx.broker, ctx.record
    problem = stall_problem(broker)
    if problem is not None or broker is None:
        raise RuntimeError(problem)
    duration = ctx.fault.duration or 0.0
    if broker.facts.pauses_itself:  # Redis: CLIENT PAUSE, no process frozen
        _pause_redis(broker.url, duration, record)
        ctx.sleep_until((record.at or time.time()) + duration)
        record.proof.append(_redis_answers_again(broker.url, record))
        return
    proc = broker.owned()
    assert proc is not None
    members = broker.server.members() if broker.server is not None else [proc.pid]
    with _processes_stopped(members, record, f"the {broker.kind} server"):
        ctx.sleep_until((record.at or time.time()) + duration)



def _pause_redis(url: str, duration: float, record: FaultRecord) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        client.client_pause(max(1, round(duration * 1000)), all=True)
        record.injected, record.at = True, time.time()
        record.ended = record.at + duration  # Redis ends the pause itself, even if we are gone
    finally:
        client.close()
    probe = redis.Redis.from_url(url, socket_timeout=PROBE_S, socket_connect_timeout=PROBE_S)
    started = time.time()
    try:
        probe.ping()
        record.proof.append(f"a PING during the pause was answered after {time.time() - started:.2f} s")
    except (redis.exceptions.TimeoutError, redis.exceptions.ConnectionError):
        record.proof.append(f"Redis at {describe(url)} did not answer a PING within {PROBE_S:g} s "
                            "during the pause (CLIENT PAUSE ALL)")
    finally:
        probe.close()


def _redis_answers_again(url: str, record: FaultRecord) -> str:
    import redis

    probe = redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=5)
    try:
        probe.ping()
        return f"Redis answered again {time.time() - (record.at or time.time()):.2f} s after the pause began"
    except (redis.exceptions.TimeoutError, redis.exceptions.ConnectionError) as exc:
        return f"Redis did not answer after the pause: {exc}"
    finally:
        probe.close()
