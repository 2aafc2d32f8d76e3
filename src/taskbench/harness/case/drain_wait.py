"""How long a drain waits (``taskbench run``): a fixed ``--drain-timeout``, an estimate that follows the
backlog, a stall bound past every redelivery, and the wait for what a backend promises back after a kill.

The drain itself (:func:`taskbench.harness.commands.phases.drain`) takes these as its ``timeout``,
``stall`` and ``follow``.
"""

from __future__ import annotations

from taskbench.harness.config import RunConfig
from taskbench.harness.processes.stack import Say
from taskbench.results import FaultRecord

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
    while it still runs tasks, at its own pace, within :data:`LONGEST_DRAIN` (phases.drain's ``follow``)."""
    return bool(cfg.phases or cfg.drain_follows_backlog)


def redelivery_timeout(cfg: RunConfig, name: str, timeout: float, record: FaultRecord, *, load_start: float,
                       load_end: float, say: Say) -> float:
    """The drain's timeout, long enough for what ``name`` promises to bring back after the fault: a
    dead worker's tasks return ``redelivery_wait`` after the kill (RQ with Retry: up to 2100 s with RQ's
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
