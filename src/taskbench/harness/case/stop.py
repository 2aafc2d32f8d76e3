"""The stop step of a case: what runs the tasks stopped before an audit of a drain that did not end, what
the stopped processes' exit codes say, and the clean-up of what the case wrote."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskbench import backends
from taskbench.harness.faults.stalls import redis_errors, server_of
from taskbench.harness.keys import delete_run_keys
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.procgroup import Managed
from taskbench.results import Cleanup
from taskbench.settings import Settings

Say = Callable[[str], None]


def stop_executors(procs: ProcessSet, has_worker: bool) -> list[str]:
    """Stop what runs the tasks (the workers; the API of a backend without them) before the audit of a
    drain that did not end: while they run, the drain's count, the audit's and the metrics' would each be
    a figure of another moment. The names stopped."""
    names = [p.name for p in procs.procs if p.name.startswith("worker")] if has_worker else ["api"]
    return procs.stop_some(names)


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


#: how long a purge gets: a broker that went silent mid-run must not hold the clean-up for longer
PURGE_TIMEOUT = 60.0


def purge(python: Path, env_vars: dict[str, str], logs: Path, timeout: float = PURGE_TIMEOUT) -> str:
    """Delete the run's queues or streams on a RabbitMQ/NATS/PostgreSQL broker, from the backend's environment.

    Never raises: the clean-up runs after the measurement, and a broker that does not answer (a silent port,
    a stall) is said in the case's ``cleanup.purge``. The purge runs in a process group of its own, stopped
    by its id when its time is up."""
    proc = Managed(name="purge", argv=[str(python), "-m", "taskbench", "purge"], log_path=logs / "purge.log")
    try:
        logs.mkdir(parents=True, exist_ok=True)
        proc.start({**os.environ, **env_vars})
    except OSError as exc:
        return f"failed ({exc.strerror or exc})"
    assert proc.popen is not None
    try:
        code = proc.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.stop(timeout=5.0)
        return f"failed (no answer in {timeout:g} s, see purge.log)"
    proc.stop(timeout=5.0)  # its group: anything it left behind
    return "ok" if code == 0 else f"failed (exit {code}, see purge.log)"


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


