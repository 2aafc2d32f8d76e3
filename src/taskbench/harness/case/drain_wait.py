"""The drain of a case: the wait until every accepted task ran (or a broadcast backend's copies stopped
coming), and how long it waits: a fixed ``--drain-timeout``, an estimate that follows the backlog, a stall
bound past every redelivery, and the wait for what a backend promises back after a kill.

``--restart-workers`` (:func:`supervised` during the load, the drain's own watch after it) starts again a
worker that exited on its own.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from taskbench.harness.config import RunConfig
from taskbench.harness.faults.stalls import Patient, server_of
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.ledger import Ledger
from taskbench.procgroup import Managed
from taskbench.results import FaultRecord
from taskbench.wait import WaitTimeoutError, wait_until

Say = Callable[[str], None]

@dataclass
class Drain:
    """How the wait for the accepted tasks ended."""

    drained: bool
    deadline: float
    failures: list[str] = field(default_factory=list)
    #: workers that exited on their own and were started again, one line each
    revived: list[str] = field(default_factory=list)
    #: why the wait ended before every task ran (a timeout, a stall), without a count: the count is the
    #: audit's, taken once the workers are stopped (:meth:`lines`), so the run says one number
    ended: str | None = None
    #: the wait timed out while tasks were still running (one ran within the last :data:`STILL_RUNNING`
    #: seconds, or the stall window): what had not run was the backlog, not tasks a fault lost, so no
    #: promise that allows losses excuses it
    still_running: bool = False

    def lines(self, lost: int | None, indeterminate: str = "") -> list[str]:
        """The failures, with the reason the wait ended and the audit's count of tasks that never ran;
        ``indeterminate``: what it says of the tasks that started and never finished (none: empty)."""
        if self.ended is None:
            return list(self.failures)
        # with starts recorded (a user's task), a task that had not run is one that had not started
        verb = "had not started" if indeterminate else "had not run"
        count = (f"{lost} accepted tasks {verb} when the workers were stopped (the audit counts them lost)"
                 if lost is not None else "the audit could not count the tasks that had not run")
        return [*self.failures, f"{self.ended}: {count}" + (f"; {indeterminate}" if indeterminate else "")]


#: ``--restart-workers`` starts exited workers again at most this many times a case (a crash loop ends)
MAX_REVIVALS = 10


@contextlib.contextmanager
def supervised(procs: ProcessSet, revive: Callable[[Managed], str | None] | None, say: Say,
               interval: float = 0.2) -> Iterator[list[str]]:
    """``--restart-workers`` during the load: a thread that starts again every worker that exited on
    its own (at most MAX_REVIVALS), as the drain's wait does after it. Yields the lines it wrote."""
    lines: list[str] = []
    if revive is None:
        yield lines
        return
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(interval) and len(lines) < MAX_REVIVALS:
            for proc in procs.dead():
                if not proc.name.startswith("worker") or len(lines) >= MAX_REVIVALS:
                    continue
                line = revive(proc)
                if line is None:  # a fault killed it: the fault restarts it
                    continue
                lines.append(line)
                say(line)

    thread = threading.Thread(target=watch, name="supervisor", daemon=True)
    thread.start()
    try:
        yield lines
    finally:
        stop.set()
        thread.join(10)


class _Watch:
    """What a drain watches: the ledger's count of executions (and when it last grew), the processes that
    died or were started again, and the stall window."""

    def __init__(self, procs: ProcessSet, client: Any, ledger: Ledger, result: Drain, *, target: int,
                 accepted: list[str], say: Say, revive: Callable[[Managed], str | None] | None,
                 stall: float | None) -> None:
        self.procs, self.client, self.ledger, self.result = procs, client, ledger, result
        self.target, self.waiting, self.say, self.revive, self.stall = target, accepted, say, revive, stall
        self.reported: set[str] = set()
        self.patient = Patient(server_of(client), say, purpose="the drain's count of executed tasks")
        self.progress_at, self.last_count = time.time(), -1
        self.ran_at: float | None = None  # when the count last grew while the drain watched it
        self.started, self.first_count = time.time(), -1  # the drain's first count, and when: its own pace

    def counted(self) -> bool:
        # the count is cheap; it can reach the target early when tasks whose 2xx never reached the
        # driver ran (an API killed between enqueue and answer), so the ids decide
        count = self.ledger.executed_count(self.client)
        if self.first_count < 0:
            self.started, self.first_count = time.time(), count
        if count != self.last_count:
            if self.last_count >= 0:
                self.ran_at = time.time()
            self.progress_at, self.last_count = time.time(), count
        if count >= self.target:
            self.waiting = self.ledger.unseen(self.client, self.waiting)
            return not self.waiting
        return False

    def done(self) -> bool:
        return self.patient.call(self.counted, False)

    def hopeless(self) -> str | None:
        result = self.result
        for proc in self.procs.dead():
            if self.revive is not None and proc.name.startswith("worker") and len(result.revived) < MAX_REVIVALS:
                line = self.revive(proc)  # a supervisor's restart: the case goes on, the result says so
                if line is None:  # a fault killed it: the fault restarts it
                    continue
                result.revived.append(line)
                self.say(line)
                # the new worker gets a whole stall window from its start to take up the dead one's tasks
                # (a start takes 1-2 s on an idle machine, 10 s on a busy one)
                self.progress_at = time.time()
                continue
            if proc.name not in self.reported:
                self.reported.add(proc.name)
                msg = f"{proc.name} died during the run (exit code {proc.exit_code()})"
                result.failures.append(msg)
                self.say(msg)
        if self.stall is not None and time.time() - self.progress_at > self.stall:
            result.ended = f"drain stalled: no task ran for {self.stall:.0f} s, stopped waiting"
            return result.ended
        workers = [p for p in self.procs.procs if p.name.startswith("worker")]
        api_dead = any(p.name == "api" for p in self.procs.dead())
        if (workers and all(not p.alive() for p in workers)) or (api_dead and not workers):
            return "nothing left that could run the remaining tasks"
        return None

    def running(self, timeout: float) -> bool:
        """An execution came within the still-running window of a drain of ``timeout`` s."""
        return self.ran_at is not None and time.time() - self.ran_at < still_running_window(timeout, self.stall)


def drain(procs: ProcessSet, client: Any, ledger: Ledger, *, target: int, accepted: list[str], load_end: float,
          timeout: float, say: Say, revive: Callable[[Managed], str | None] | None = None,
          stall: float | None = None, follow: float | None = None) -> Drain:
    """Wait until every accepted id ran, nothing is left that could run them, or the timeout passes.

    A Redis that does not answer is "not drained yet": retried with backoff, within the same deadline.
    ``stall``: also stop once no task has run for that many seconds (a worker that stopped consuming,
    tasks answered 2xx that never reached the broker, what a restarted broker forgot): the tasks not
    run by then are the audit's lost ones, instead of waiting out a long ``timeout``.
    ``follow``: the timeout is an estimate (``taskbench run`` without ``--drain-timeout``): a drain
    still running its backlog when it passes goes on for what is left at the drain's own pace
    (:func:`extended`), said in one line, until ``follow`` seconds after the load at the most.
    """
    deadline = load_end + timeout
    result = Drain(drained=False, deadline=deadline)
    watch = _Watch(procs, client, ledger, result, target=target, accepted=accepted, say=say, revive=revive,
                   stall=stall)
    try:
        while True:
            result.drained = bool(wait_until(watch.done, max(0.0, deadline - time.time()), abort=watch.hopeless,
                                             raise_on_timeout=False))
            now = time.time()
            later = None if result.drained or follow is None or not watch.running(timeout) \
                or watch.first_count < 0 else extended(
                    done=watch.last_count - watch.first_count, seconds=now - watch.started,
                    left=target - watch.last_count, now=now, latest=load_end + follow)
            if later is None or later <= deadline + 1:
                break
            say(f"the drain goes on up to {later - load_end:.0f} s after the load: {target - watch.last_count} tasks "
                f"left at {(watch.last_count - watch.first_count) / max(1e-9, now - watch.started):.1f} tasks/s in "
                f"the drain (--drain-timeout sets a fixed wait)")
            deadline = result.deadline = later
            timeout = later - load_end
    except WaitTimeoutError:
        return result
    if not result.drained:
        patient = watch.patient
        result.ended = f"drain timeout: {timeout:.0f} s after the load ended" + (
            f" ({patient.server} did not answer: {patient.error})" if patient.stalled else "")
        result.still_running = watch.running(timeout)
        if result.still_running:
            result.ended += ", tasks still running"
    return result


def extended(*, done: int, seconds: float, left: int, now: float, latest: float) -> float | None:
    """When a drain that ran ``done`` tasks in ``seconds`` and has ``left`` to go should end: 1.5 times
    what is left at that pace, plus 30 s, from ``now``, and no later than ``latest``; None when it ran
    nothing (no pace to go by) or nothing is left."""
    if done <= 0 or seconds <= 0 or left <= 0:
        return None
    return min(latest, now + 1.5 * left / (done / seconds) + 30)


#: seconds: a drain that timed out with an execution this recent (when it has no stall window) was
#: still running the backlog
STILL_RUNNING = 10.0


def still_running_window(timeout: float, stall: float | None) -> float:
    """How recent the last execution must be, at a drain's timeout, for the drain to have been cut off
    while it still ran the backlog: :data:`STILL_RUNNING` (or the stall window, if shorter), but no more
    than a third of the drain's own time (at least 1 s). A drain that saw its last tasks run well before
    its end (a killed API's successor finishing its own tasks early in a 3 s drain; an at-most-once
    worker done with its backlog while the drain waits out a long redelivery bound for what the kill
    took) was not cut off: a window as long as the stall bound (2 x a library's 2100 s redelivery) would call it so."""
    return min(stall or STILL_RUNNING, STILL_RUNNING, max(1.0, timeout / 3))


#: a broadcast backend's drain ends once no execution came for this long
SETTLE_QUIET = 3.0
#: the driver's failures whose request may still have been enqueued: it stopped waiting, the API went on
UNKNOWN_OUTCOMES = frozenset({"timeout", "reset", "protocol"})


def quiet(client: Any, ledger: Ledger, *, say: Say, failed: dict[str, str], quiet: float = SETTLE_QUIET,
          timeout: float = 60.0) -> None:
    """After a drain, when requests ended without an answer the driver waited for (a timeout, a reset):
    wait until executions stop coming for ``quiet`` s (within ``timeout``), so the audit and the metrics
    read a ledger that no longer moves. Their tasks may still run (the API got them; an overloaded one
    answers late): the audit counts them unexpected, not a ledger changing between two reads."""
    unknown = sum(1 for kind in failed.values() if kind in UNKNOWN_OUTCOMES)
    if not unknown:
        return
    patient = Patient(server_of(client), say, purpose="the count of executions")
    last, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        total = patient.call(lambda: ledger.executions_total(client), None)
        if total is not None and total != last:
            last, since = total, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.5)
    say(f"executions were still coming {timeout:g} s after the drain ({unknown} requests without an answer)")


def settle(procs: ProcessSet, client: Any, ledger: Ledger, *, accepted: list[str], load_end: float,
           timeout: float, say: Say, quiet: float = SETTLE_QUIET) -> Drain:
    """The drain of a backend that gives every worker every task (``BackendInfo.fans_out``).

    Each worker works off its own copy of the backlog, so "every id ran once" says nothing about the
    copies still coming. Wait instead until the ledger's executions (every run counted) stop growing
    for ``quiet`` s, within ``timeout`` after the load. Then ``drained``: nothing more is coming; the
    ids that never ran are the wiring's loss (the audit counts them), not a failure of the drain.
    """
    deadline = load_end + timeout
    patient = Patient(server_of(client), say, purpose="the count of executions")
    last, since = -1, time.monotonic()
    while time.time() < deadline:
        total = patient.call(lambda: ledger.executions_total(client), None)
        now = time.monotonic()
        if total is not None and total != last:
            last, since = total, now
        elif total is not None and now - since >= quiet:
            left = patient.call(lambda: len(ledger.unseen(client, accepted)), None)
            say(f"executions settled at {total} for {len(accepted)} accepted tasks"
                + (f"; {left} accepted tasks never ran" if left else ""))
            return Drain(drained=True, deadline=time.time())
        workers = [p for p in procs.procs if p.name.startswith("worker")]
        if workers and all(not p.alive() for p in workers):
            return Drain(drained=False, deadline=deadline, failures=["every worker died during the drain"])
        time.sleep(0.5)
    return Drain(drained=False, deadline=deadline,
                 failures=[f"drain timeout: executions were still coming {timeout:.0f} s after the load ended"])


#: seconds after the load: the longest a drain that follows its backlog, or waits for a redelivery, waits
LONGEST_DRAIN = 3600.0


def redelivery_bound(task_timeout: float) -> float:
    """Seconds without an execution after which no dead or frozen worker's task can still come back:
    every backend redelivers within its task timeout (arq: + 10 s, its in-progress key); twice that plus
    10 s leaves room for a restart and a poll. The shortest ``--drain-stall`` the drain takes."""
    return max(15.0, 2 * task_timeout + 10)


def redelivery_deadline(kills: list[float], fault_at: float | None, wait: float) -> float | None:
    """When (wall clock) the last task a kill took is due back at the latest: the last kill (or, for a fault
    still to come, its time) plus the backend's redelivery wait and a tenth of it (at least 10 s) for the
    library's own polling; None without a kill."""
    times = [*kills, *([fault_at] if fault_at is not None else [])]
    if not times:
        return None
    return max(times) + wait + max(10.0, wait / 10)


def drain_timeout(cfg: RunConfig, accepted: int, executed: int, seconds: float) -> float:
    """``--drain-timeout``, or for phases (whose backlog is a figure, not a failure) and for a run that was not
    given one (``drain_follows_backlog``) long enough for the backlog left at the load's end at the pace the
    workers kept during it: 1.5 times that, plus 30 s, within an hour; a drain slower than that pace goes on
    at its own (``follow``). A stalled drain still ends after ``--drain-stall`` without an execution."""
    if not follows_backlog(cfg) or executed <= 0 or seconds <= 0:
        return cfg.drain_timeout
    pace = executed / seconds
    return min(LONGEST_DRAIN, max(cfg.drain_timeout, 1.5 * max(0, accepted - executed) / pace + 30))


def follows_backlog(cfg: RunConfig) -> bool:
    """Whether the drain's timeout is an estimate that follows the backlog (phases, whose backlog is a
    figure; ``taskbench run`` without ``--drain-timeout``), not a fixed wait: the drain then goes on
    while it still runs tasks, at its own pace, within :data:`LONGEST_DRAIN` (:func:`drain`'s ``follow``)."""
    return bool(cfg.phases or cfg.drain_follows_backlog)


def redelivery_timeout(cfg: RunConfig, name: str, timeout: float, record: FaultRecord, *, load_start: float,
                       load_end: float, say: Say) -> float:
    """The drain's timeout, long enough for what ``name`` promises to bring back after the fault: a
    dead worker's tasks return ``redelivery_wait`` after the kill (a forking queue with retries: up to 2100 s with its
    defaults), and a drain that stopped first would count the promise broken. Within an hour."""
    fault = cfg.fault
    if fault is None:
        return timeout
    wait = cfg.redelivery_wait(name)
    due = redelivery_deadline(record.kills, load_start + fault.at + (fault.duration or 0.0), wait)
    if due is None or due - load_end <= timeout:
        return timeout
    longer = min(LONGEST_DRAIN, due - load_end)
    say(f"the drain waits up to {longer:.0f} s (not {timeout:.0f} s): {name} promises a killed worker's tasks "
        f"back within {wait:.0f} s of the kill")
    return longer
