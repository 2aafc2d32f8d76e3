"""The phases of a queue case after start-up: warm-up, drain, metrics cross-check, clean-up, verdict.

Each phase is a function that takes what it needs and returns what it found; none edits a case.
The runner (:mod:`taskbench.harness.commands.runner`) puts their values into a :class:`QueueCase`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.harness import HarnessError
from taskbench.harness.faults.stalls import Patient, read_patiently, redis_errors, server_of
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.harness.scrape import cross_check
from taskbench.ledger import Ledger
from taskbench.ledger_rows import Rows
from taskbench.metrics import final_key
from taskbench.procgroup import Managed, forget_group, watch_group
from taskbench.results import AuditResult, Cleanup, FaultRecord, Load, MetricsCheck, Status, Summary
from taskbench.settings import Settings
from taskbench.wait import WaitTimeoutError, wait_until

WARMUP_PREFIX = "w"
Say = Callable[[str], None]
#: how long the audit's read of the ledger, and the metrics check's, wait for a Redis that does not answer
READ_TIMEOUT = 30.0


def warm_up(template: RequestTemplate, load: LoadSpec, requests: int, *, procs: ProcessSet, client: Any,
            ledger: Ledger, timeout: float, logs: Path, say: Say = print) -> int:
    """A few requests before the load (connections, imports, JIT-free caches); returns how many were accepted.

    A Redis that does not answer while the warm-up's tasks are counted is waited for (within ``timeout``).
    """
    if not requests:
        return 0
    spec = LoadSpec(users=min(load.users, 10), requests=requests, id_prefix=WARMUP_PREFIX, timeout=load.timeout)
    warm = run_load(template, spec)
    if not warm.ok:
        raise HarnessError(f"warm-up: none of {warm.requests} requests was accepted "
                           f"(errors: {warm.errors}); see the logs in {logs}")
    patient = Patient(server_of(client), say, purpose="the warm-up's tasks")

    def died() -> str | None:
        dead = procs.dead()
        return ", ".join(f"{p.name} exited with code {p.exit_code()} (log: {p.log_path})" for p in dead) or None

    try:
        done = wait_until(lambda: patient.call(lambda: ledger.executed_count(client) >= warm.ok, False), timeout,
                          what="the warm-up's tasks", abort=died, raise_on_timeout=False)
    except WaitTimeoutError as exc:  # a process died: said in one line, not a traceback
        raise HarnessError(f"warm-up: {exc}") from None
    if not done:  # a slow worker: the load starts behind them (the load's progress counts them as they run)
        ran = patient.call(lambda: ledger.executed_count(client), None)
        say(f"warm-up: {'some' if ran is None else ran} of its {warm.ok} tasks ran within {timeout:g} s; the load "
            "starts with the rest still queued")
    return warm.ok


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

    def lines(self, lost: int | None) -> list[str]:
        """The failures, with the reason the wait ended and the audit's count of tasks that never ran."""
        if self.ended is None:
            return list(self.failures)
        count = (f"{lost} accepted tasks had not run when the workers were stopped (the audit counts them lost)"
                 if lost is not None else "the audit could not count the tasks that had not run")
        return [*self.failures, f"{self.ended}: {count}"]


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
    reported: set[str] = set()
    waiting = accepted
    patient = Patient(server_of(client), say, purpose="the drain's count of executed tasks")

    progress_at, last_count = time.time(), -1
    ran_at: float | None = None  # when the count last grew while the drain watched it
    started, first_count = time.time(), -1  # the drain's first count, and when: its own pace (follow)

    def counted() -> bool:
        nonlocal waiting, progress_at, last_count, ran_at, started, first_count
        # the count is cheap; it can reach the target early when tasks whose 2xx never reached the
        # driver ran (an API killed between enqueue and answer), so the ids decide
        count = ledger.executed_count(client)
        if first_count < 0:
            started, first_count = time.time(), count
        if count != last_count:
            if last_count >= 0:
                ran_at = time.time()
            progress_at, last_count = time.time(), count
        if count >= target:
            waiting = ledger.unseen(client, waiting)
            return not waiting
        return False

    def done() -> bool:
        return patient.call(counted, False)

    def hopeless() -> str | None:
        nonlocal progress_at
        for proc in procs.dead():
            if revive is not None and proc.name.startswith("worker") and len(result.revived) < MAX_REVIVALS:
                line = revive(proc)  # a supervisor's restart: the case goes on, the result says so
                if line is None:  # a fault killed it: the fault restarts it
                    continue
                result.revived.append(line)
                say(line)
                # the new worker gets a whole stall window from its start to take up the dead one's tasks
                # (a start takes 1-2 s on an idle machine, 10 s on a busy one: issue 34)
                progress_at = time.time()
                continue
            if proc.name not in reported:
                reported.add(proc.name)
                msg = f"{proc.name} died during the run (exit code {proc.exit_code()})"
                result.failures.append(msg)
                say(msg)
        if stall is not None and time.time() - progress_at > stall:
            result.ended = f"drain stalled: no task ran for {stall:.0f} s, stopped waiting"
            return result.ended
        workers = [p for p in procs.procs if p.name.startswith("worker")]
        api_dead = any(p.name == "api" for p in procs.dead())
        if (workers and all(not p.alive() for p in workers)) or (api_dead and not workers):
            return "nothing left that could run the remaining tasks"
        return None

    try:
        while True:
            result.drained = bool(wait_until(done, max(0.0, deadline - time.time()), abort=hopeless,
                                             raise_on_timeout=False))
            now = time.time()
            running = ran_at is not None and now - ran_at < still_running_window(timeout, stall)
            later = None if result.drained or follow is None or not running or first_count < 0 else extended(
                done=last_count - first_count, seconds=now - started, left=target - last_count,
                now=now, latest=load_end + follow)
            if later is None or later <= deadline + 1:
                break
            say(f"the drain goes on up to {later - load_end:.0f} s after the load: {target - last_count} tasks "
                f"left at {(last_count - first_count) / max(1e-9, now - started):.1f} tasks/s in the drain "
                f"(--drain-timeout sets a fixed wait)")
            deadline = result.deadline = later
            timeout = later - load_end
    except WaitTimeoutError:
        return result
    if not result.drained:
        result.ended = f"drain timeout: {timeout:.0f} s after the load ended" + (
            f" ({patient.server} did not answer: {patient.error})" if patient.stalled else "")
        result.still_running = ran_at is not None and time.time() - ran_at < still_running_window(timeout, stall)
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
    took) was not cut off: a window as long as the stall bound (2 x RQ's 2100 s) would call it so."""
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


def read_ledger(client: Any, ledger: Ledger, *, say: Say,
                timeout: float = READ_TIMEOUT) -> tuple[Rows | None, list[str]]:
    """The ledger's rows for the audit, read again with backoff while Redis does not answer.

    None and a one-line failure when it did not answer within ``timeout``: the case fails, the run goes on.
    """
    patient = Patient(server_of(client), say, purpose="the audit's read of the ledger")
    rows = read_patiently(lambda: ledger.rows(client), patient, timeout)
    if rows is None:
        return None, [f"audit: could not read the ledger: {patient.server} did not answer within "
                      f"{timeout:g} s ({patient.error})"]
    return rows, []


def stop_executors(procs: ProcessSet, has_worker: bool) -> list[str]:
    """Stop what runs the tasks (the workers; the API of a backend without them) before the audit of a
    drain that did not end: while they run, the drain's count, the audit's and the metrics' would each be
    a figure of another moment. The names stopped."""
    names = [p.name for p in procs.procs if p.name.startswith("worker")] if has_worker else ["api"]
    return procs.stop_some(names)


def check_metrics(client: Any, settings: Settings, port: int, executions: int,
                  fault: FaultRecord | None, revived: list[str] | None = None,
                  stopped: list[str] | None = None) -> tuple[MetricsCheck, list[str]]:
    """The processes' own counters against the ledger: succeeded == executions. Returns the check and failures.

    ``stopped``: processes stopped before the audit (:func:`stop_executors`): a worker's counters are the
    ones it wrote as it stopped; an API's went with it, so the audit is the account.
    """
    urls = {"api": f"http://127.0.0.1:{port}/metrics"}
    patient = Patient(server_of(client), lambda _: None, purpose="the workers' metrics URLs")
    registered = read_patiently(lambda: client.hgetall(settings.metrics_key), patient, READ_TIMEOUT / 3)
    finals = read_patiently(lambda: client.hgetall(final_key(settings.prefix)), patient, READ_TIMEOUT / 3)
    if registered is None or finals is None:
        error = f"could not read the workers' metrics URLs: {patient.server} did not answer ({patient.error})"
        return MetricsCheck(ledger_executions=executions, errors=[error]), [f"metrics: {error}"]
    if stopped and "api" in stopped:
        checked = MetricsCheck(ledger_executions=executions,
                               note="the API ran the tasks and was stopped at the drain's end, its counters with "
                                    "it; the ledger's audit is the account of this run")
        return checked, []
    urls.update({_text(k): _text(v) for k, v in registered.items()})
    injected = fault is not None and fault.injected
    # a SIGKILLed worker's counters are gone: no wait makes them add up (a paused one may catch up)
    killed = injected and fault is not None and fault.fault.startswith("kill-worker")
    settle = 0.0 if killed else 0.5 if injected else 3.0
    checked = MetricsCheck.model_validate(cross_check(urls, executions, settle=settle,
                                                      finals={_text(k): _text(v) for k, v in finals.items()}))
    if checked.match:
        return checked, []
    if injected and fault is not None:
        # a SIGKILLed process takes its /metrics with it; a paused or stalled one may be scraped
        # before it caught up: the counters cannot be the account of a fault run
        checked.note = (f"{fault.target} was hit by {fault.fault} mid-run, so its counters are incomplete; "
                        "the ledger's audit is the account of this run")
        return checked, []
    if revived:  # the exited worker's counters went with it
        checked.note = (f"{len(revived)} worker exit(s) during the run, started again (--restart-workers): "
                        "the exited process's counters are gone; the ledger's audit is the account of this run")
        return checked, []
    succeeded = checked.totals.get("taskbench_tasks_succeeded_total", 0)
    return checked, [f"metrics disagree with the ledger: {succeeded:.0f} tasks succeeded by the workers' "
                     f"counters, {executions} executions in the ledger"
                     + (f" ({'; '.join(checked.errors)})" if checked.errors else "")]


def clean_up(client: Any, settings: Settings, backend: backends.BackendInfo, *, keep: bool, purge_on_broker: bool,
             python: Path, env: dict[str, str], logs: Path, say: Say = print, broker: Any = None) -> Cleanup:
    """Delete what the case wrote (after every process stopped: nothing can write any more).

    ``client`` is the ledger's Redis, ``broker`` the broker Redis when it is another server. A Redis
    that does not answer leaves the keys where they are (``kept``), said in one line.
    """
    if keep:
        result = Cleanup(kept=True, prefix=settings.prefix)
    else:
        try:
            patterns, deleted = delete_run_keys(client, settings.run_id, backend, broker)
            result = Cleanup(kept=False, patterns=patterns, deleted_keys=deleted)
        except redis_errors() as exc:
            say(f"{server_of(client)} did not answer ({exc}): the case's keys stay under {settings.prefix}")
            result = Cleanup(kept=True, prefix=settings.prefix)
    if purge_on_broker and not keep:
        result.purge = purge(python, env, logs)
    return result


def prepare(python: Path, env_vars: dict[str, str], logs: Path, say: Say = print) -> None:
    """Prepare the case's broker from the backend's environment (``taskbench prepare``: a PostgreSQL
    queue's schema) before its API and workers start; a failure is a HarnessError with its output."""
    started = time.monotonic()
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "prepare.log").open("wb") as log:
        proc = subprocess.Popen([str(python), "-m", "taskbench", "prepare"], env={**os.environ, **env_vars},
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        watch_group(proc.pid)  # dies with the harness
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        finally:
            forget_group(proc.pid)
    if code != 0:
        tail = (logs / "prepare.log").read_text(errors="replace").strip().splitlines()[-5:]
        raise HarnessError(f"preparing the broker failed ({'timed out after 120 s' if code is None else f'exit {code}'}"
                           f", {logs / 'prepare.log'}): " + " / ".join(tail))
    say(f"broker prepared in {time.monotonic() - started:.1f} s (the library's schema)")


def purge(python: Path, env_vars: dict[str, str], logs: Path) -> str:
    """Delete the run's queues or streams on a RabbitMQ/NATS broker, from the backend's environment."""
    out = subprocess.run([str(python), "-m", "taskbench", "purge"], env={**os.environ, **env_vars},
                         capture_output=True, text=True, timeout=60, check=False)
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "purge.log").write_text(out.stdout + out.stderr)
    return "ok" if out.returncode == 0 else f"failed (exit {out.returncode}, see purge.log)"


def stop_failures(procs: ProcessSet) -> list[str]:
    """What a stopped set's exit codes say: 0 and -15 are a clean stop; a SIGKILL names the log that ends
    with the process's threads' stacks, where it wrote them (:mod:`taskbench.procgroup`)."""
    failures = []
    for name, code in procs.exit_codes.items():
        if code == -signal.SIGKILL:
            stacks = procs.stacks.get(name)
            failures.append(f"{name} was killed at stop: still running {procs.stop_timeout:g} s after SIGTERM"
                            + (f" (its threads' stacks end {stacks})" if stacks else ""))
        elif code not in (0, -signal.SIGTERM):
            failures.append(f"{name} exited with code {code} at stop")
    return failures


def queue_summary(load: Load, audit: AuditResult | None, *, load_start: float, drained: bool,
                  fault: FaultRecord | None) -> Summary:
    """The row of a queue case: the seed's columns and the audit's (none when the ledger could not be read)."""
    lat = load.latency_ms
    requests = max(1, load.requests)
    summary = Summary(
        requests=load.requests, rps=load.rps, p50_ms=lat.p50, p95_ms=lat.p95, p99_ms=lat.p99,
        # a 409 (an id sent twice) is the API keeping its contract, not an error: counted apart
        errors_pct=100.0 * (requests - load.ok - load.refused) / requests,
        driver_cpu_pct=100.0 * load.max_utilization, driver_saturated=load.saturated,
    )
    if audit is not None:
        last = audit.last_finish
        summary.time_to_run_all_s = (last - load_start) if (last and drained) else None
        summary.accepted, summary.executed = audit.accepted, audit.executed
        summary.lost, summary.duplicated = audit.lost, audit.duplicated
        summary.extra_executions = audit.extra_executions
        summary.unexpected, summary.late = audit.categories.unexpected, audit.late
        summary.refused = audit.categories.refused
        summary.e2e_p95_ms = audit.end_to_end_ms.p95
        first = audit.first_start
        if first is not None and last is not None and last > first and audit.executed > 1:
            summary.executed_per_s = audit.executed / (last - first)
    if fault is not None and fault.injected:
        summary.fault = fault.fault
        summary.restart_ready_s = fault.ready_after_s
        summary.accepting_again_s = fault.accepting_again_s
        summary.executing_again_s = fault.executing_again_s
        summary.executing_90_s = fault.executing_90_s
        summary.first_execution_s = fault.first_execution_s
        summary.throughput_ratio = fault.throughput_ratio
    return summary


def queue_status(summary: Summary, *, audit_ok: bool, drained: bool, failures: list[str],
                 bounded: bool = False) -> Status:
    """ok: clean; errors: some requests failed or were refused as known ids (409), or tasks were lost
    or ran twice where the backend does not promise otherwise (an unsafe seed wiring whose duplicates
    are its measured figure); failed: otherwise. ``bounded``: a fault case, whose lost and duplicated
    tasks were judged by its promise's bounds (beyond them: a failure), so inside them they are ``ok``."""
    if not audit_ok or not drained or failures or not summary.accepted:
        return "failed"
    counted = 0 if bounded else summary.lost or summary.duplicated
    return "errors" if summary.errors_pct or summary.refused or counted else "ok"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
