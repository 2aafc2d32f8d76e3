"""Faults on a service taskbench does not own (``taskbench run --target``).

Nothing is injected unless asked. What can be done without owning the service:

- ``kill-worker@T[/P]`` and ``pause-worker@T+D`` on a worker the harness started from ``--worker-cmd``
  (its own process group, as every process the harness starts): the registry's own actions, unchanged
  (the killed worker is started again with the same command);
- ``kill-api@T`` on an API the harness started from ``--api-cmd`` (the registry's action: started again
  with the same command, on the same port);
- ``kill-worker@T`` on ``--worker-pid``: SIGKILL that process and its children, once; it is not started
  again by taskbench (your supervisor does, or the rest of the run shows what its absence costs);
- ``stall-broker@T+D`` and ``restart-broker[-term]@T`` on the Redis of ``--broker-url``, only with
  ``--allow-fault-on-target``: ``CLIENT PAUSE`` (the registry's action), or SIGKILL/SIGTERM of the pid
  that Redis reports (``INFO server``, a server on this machine only), after which taskbench waits for
  it to answer again: your supervisor (systemd, a container's restart policy) starts it, taskbench never does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from taskbench.harness.brokers.redis import describe
from taskbench.harness.faults.broker_restart import SIGNALS
from taskbench.harness.faults.context import FaultContext
from taskbench.harness.faults.kinds import KINDS, Fault, FaultKind
from taskbench.wait import WaitTimeoutError, wait_until

__all__ = ["TargetFault", "target_fault"]

#: the kinds that act on the worker, and those that act on the broker Redis
ON_WORKER = ("kill-worker", "pause-worker")
ON_BROKER = ("stall-broker", *SIGNALS)


@dataclass(frozen=True)
class TargetFault(Fault):
    """A :class:`Fault` whose action is the one for a target (``action`` None: the registry's own)."""

    action: Callable[[FaultContext], None] | None = None

    @property
    def spec(self) -> FaultKind:
        base = KINDS[self.kind]
        return base if self.action is None else dataclasses.replace(base, action=self.action, check=None)


def target_fault(fault: Fault, *, worker_cmd: str | None, worker_pid: int | None, broker_url: str | None,
                 allowed: bool, api_cmd: str | None = None) -> TargetFault:
    """``fault`` as it acts on a target; ValueError (one line) when it cannot be done there."""
    kind = fault.kind

    def same(action: Callable[[FaultContext], None] | None = None) -> TargetFault:
        return TargetFault(fault.kind, fault.at, fault.duration, fault.period, action)

    if kind in ON_WORKER:
        if worker_cmd:
            return same()
        if worker_pid is not None and kind == "kill-worker":
            if fault.period is not None:
                raise ValueError("--fault kill-worker@T/P needs --worker-cmd: a --worker-pid is killed once, "
                                 "taskbench cannot start it again")
            return same(_kill_pid(worker_pid))
        raise ValueError(f"--fault {kind} on a target needs --worker-cmd (a worker the harness starts"
                         + (" and owns)" if kind == "pause-worker" else ") or --worker-pid"))
    if kind == "kill-api":
        if api_cmd:
            return same()
        raise ValueError("--fault kill-api on a target needs --api-cmd (an API the harness starts and owns)")
    if kind in ON_BROKER:
        if not broker_url or not broker_url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"--fault {kind} on a target needs --broker-url: the Redis your service's queue uses")
        if not allowed:
            raise ValueError(f"--fault {kind} acts on your Redis at {describe(broker_url)}: say so with "
                             "--allow-fault-on-target")
        if kind == "stall-broker":
            return same()  # CLIENT PAUSE on any Redis: the registry's action, given the URL
        return same(_restart_redis(broker_url, SIGNALS[kind]))
    raise ValueError(f"--fault {kind} cannot be injected on a target: taskbench does not own your service's "
                     f"processes; on a target: {', '.join((*ON_WORKER, 'kill-api', *ON_BROKER))}")


def _kill_pid(pid: int) -> Callable[[FaultContext], None]:
    def kill_worker_pid(ctx: FaultContext) -> None:
        record = ctx.record
        try:
            leader = psutil.Process(pid)
            tree = [leader, *leader.children(recursive=True)]
        except psutil.Error as exc:
            raise RuntimeError(f"--worker-pid {pid}: {exc}") from None
        record.injected, record.at = True, time.time()
        record.kills.append(record.at)
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        _, alive = psutil.wait_procs(tree, timeout=5)
        record.killed_pid = pid
        record.proof.append(f"kill: pid {pid} and {len(tree) - 1} child(ren) got SIGKILL; "
                            f"{len(tree) - len(alive)} of {len(tree)} gone")
        record.note = "a --worker-pid is not started again by taskbench (your supervisor may)"

    return kill_worker_pid


def _restart_redis(url: str, sig: signal.Signals) -> Callable[[FaultContext], None]:
    def restart_target_redis(ctx: FaultContext) -> None:
        import redis

        record = ctx.record
        client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        try:
            pid = int(client.info("server")["process_id"])
        finally:
            client.close()
        if not psutil.pid_exists(pid):
            raise RuntimeError(f"Redis at {describe(url)} reports pid {pid}, which is not on this machine: "
                               "taskbench only restarts a Redis it can signal")
        record.injected, record.at = True, time.time()
        os.kill(pid, sig)
        record.killed_pid = pid
        record.proof.append(f"{sig.name} to Redis at {describe(url)} (pid {pid})")

        def answers() -> bool:
            probe = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
            try:
                return bool(probe.ping()) and int(probe.info("server")["process_id"]) != pid
            except (redis.exceptions.RedisError, OSError):
                return False
            finally:
                probe.close()

        try:
            wait_until(answers, ctx.ready_timeout, interval=0.1, what="your Redis answering again")
        except WaitTimeoutError:
            raise RuntimeError(f"Redis at {describe(url)} did not answer again within {ctx.ready_timeout:g} s "
                               "of the kill: taskbench never starts your Redis; run it under a supervisor "
                               "(systemd, a container's restart policy)") from None
        record.ready_after_s = time.time() - record.at
        record.proof.append(f"Redis at {describe(url)} answered again after {record.ready_after_s:.2f} s")

    return restart_target_redis
