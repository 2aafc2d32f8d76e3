"""The warm-up step of a case: a few requests before the load, their tasks waited for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.harness import HarnessError
from taskbench.harness.faults.stalls import Patient, server_of
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.ledger import Ledger
from taskbench.wait import WaitTimeoutError, wait_until

#: the warm-up's task ids start with it: the audit ignores them
WARMUP_PREFIX = "w"
Say = Callable[[str], None]


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
