"""What a fault and ``--restart-workers`` add to a reference case: the injector armed on the case's
processes, the supervisor that starts an exited worker again, and the promise that judges the losses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from taskbench.harness import HarnessError
from taskbench.harness.config import RunConfig
from taskbench.harness.faults.context import Broker
from taskbench.harness.faults.injector import Injector
from taskbench.harness.faults.recovery import promise_of
from taskbench.harness.faults.stalls import Patient, server_of
from taskbench.harness.processes.stack import Stack
from taskbench.net import healthy
from taskbench.procgroup import Managed
from taskbench.results import LimitRecord, Promise, QueueCase
from taskbench.settings import Settings

Say = Callable[[str], None]


def arm(cfg: RunConfig, stack: Stack, client: Any, settings: Settings, port: int, case: QueueCase, broker: Broker,
        say: Say) -> tuple[Injector | None, dict[str, LimitRecord]]:
    """The fault of the config, armed on this case's processes (None when there is nothing to inject), and
    the limits its restarted processes get (filled as they restart)."""
    fault = cfg.fault
    restarted_limits: dict[str, LimitRecord] = {}
    if fault is None or (fault.target.startswith("worker") and not case.has_worker):
        return None, restarted_limits
    problem = fault.problem(broker)
    if problem:
        raise HarnessError(problem)

    patient = Patient(server_of(client), say, purpose="the restarted worker to register")

    def ready(proc: Managed) -> bool:
        if proc.name == "api":
            return healthy(port)
        return patient.call(lambda: bool(client.hexists(f"{settings.prefix}ready", f"worker:{proc.pid}")), False)

    def restarted(proc: Managed) -> None:
        # the new process gets the limits the killed one had, as a restarted container would
        limit = cfg.limits.get("api" if proc.name == "api" else "workers")
        if limit is not None:
            restarted_limits[proc.name] = stack.limit_process(proc, limit, track=False)

    injector = Injector(fault, stack.procs, ready=ready, restarted=restarted, ready_timeout=cfg.startup_timeout,
                        broker=broker)
    return injector, restarted_limits


def supervisor(cfg: RunConfig, stack: Stack) -> Callable[[Managed], str | None]:
    """``--restart-workers``: a worker that exited on its own is started again with the limits it had, as
    a supervisor with ``restart: on-failure`` would; the line says what happened. None: not this one's to
    restart (a fault killed it and restarts it, or the set is stopping)."""
    limit = cfg.limits.get("workers")

    def revive(proc: Managed) -> str | None:
        try:
            new, code = stack.procs.revive(proc.name)
        except (StopIteration, KeyError, RuntimeError):
            return None
        if limit is not None:
            stack.limit_process(new, limit, track=False)
        return (f"{proc.name} (pid {proc.pid}) exited on its own with code {code}; started again as "
                f"pid {new.pid} (--restart-workers)")

    return revive


def case_promise(cfg: RunConfig, case: QueueCase, *, broker_keeps: bool) -> Promise:
    """What the case's backend promises: its registry entry on the case's broker under the run's settings,
    with the bounds of the case's fault (docs/backends.md, "What a fault case promises"). ``broker_keeps``:
    the broker keeps its queues over a restart."""
    assert case.broker is not None
    name = case.backend
    return promise_of(name, case.broker, durable=case.durable, why=case.durability, broker_keeps=broker_keeps,
                      settings=cfg.promise_settings(name), fault=cfg.fault.kind if cfg.fault else None,
                      workers=cfg.workers, concurrency=cfg.concurrency, versions=cfg.versions)
