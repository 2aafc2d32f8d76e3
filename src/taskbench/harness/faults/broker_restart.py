"""``restart-broker@T``: the broker stops mid-load and starts again on the same port and data.

``restart-broker@T`` SIGKILLs the embedded broker redis-server (a crash: only what its AOF holds
survives, so ``--redis-fsync`` decides what is lost); ``restart-broker-term@T`` sends SIGTERM (a clean
stop: Redis writes and fsyncs its AOF before it exits). The server starts again at once with the same
config file, port, password and data folder; the API and the workers reconnect by themselves. The
ledger is on the other embedded server, so the audit still sees every execution.

RabbitMQ and NATS (``--broker rabbitmq|nats``): the harness starts a private server for the run
(:mod:`taskbench.harness.brokers`) and restarts that one with its data folder, the same way: each is a
:class:`~taskbench.harness.brokers.base.PrivateServer`. Only a broker the harness started can be
restarted: a user's Redis (``--redis-url``, ``--broker-url``) or a RabbitMQ/NATS server named with
``--broker-url`` is refused before any case starts.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping

import psutil

from taskbench import brokers
from taskbench.harness.brokers.base import PrivateServer
from taskbench.harness.faults.context import Broker, FaultContext
from taskbench.net import listening
from taskbench.results import BrokerRestart, FaultRecord

#: fault kind -> the signal that stops the broker
SIGNALS = {"restart-broker": signal.SIGKILL, "restart-broker-term": signal.SIGTERM}
KINDS = {
    "restart-broker": "SIGKILL the broker server the harness started (Redis, or a private RabbitMQ/NATS), "
                      "then start it again on the same port and data",
    "restart-broker-term": "SIGTERM the broker server the harness started (a clean stop), then start it again",
}


def problem(kind: str, broker: str, server: PrivateServer | None) -> str | None:
    """Why ``kind`` cannot be injected on this run (None: it can)."""
    if kind not in SIGNALS:
        return None
    if server is None:
        return brokers.info(broker).restart_refused(kind)
    return None


def check(kind: str) -> Callable[[Broker | None], str | None]:
    """The fault registry's check of ``kind``: :func:`problem` on the case's broker."""
    def problem_of(broker: Broker | None) -> str | None:
        return problem(kind, broker.kind if broker else brokers.DEFAULT, broker.server if broker else None)
    return problem_of


def action(kind: str) -> Callable[[FaultContext], None]:
    """The fault registry's action of ``kind``: :func:`restart` of the case's embedded broker."""
    def restart_broker(ctx: FaultContext) -> None:
        server = ctx.broker.server if ctx.broker else None
        if server is None:
            raise RuntimeError(f"{kind}: no broker server of the harness's to restart")
        restart(kind, server, ctx.record, timeout=ctx.ready_timeout)
    return restart_broker


def restart(kind: str, server: PrivateServer, record: FaultRecord, *, timeout: float = 60.0) -> None:
    """Stop ``server`` with the kind's signal, prove it is gone, start it again; fill ``record``."""
    sig = SIGNALS[kind]
    info = BrokerRestart(signal=sig.name, port=server.port, fsync=server.fsync or "none", old_pid=server.proc.pid,
                         broker=server.kind)
    record.broker_restart = info
    record.at = time.time()
    record.injected = True
    old_pid, code = server.kill(sig)
    info.down_at = time.time()
    info.exit_code = record.killed_exit_code = code
    record.killed_pid = old_pid
    if not psutil.pid_exists(old_pid):
        info.proof.append(f"pid {old_pid} is gone (exit code {code})")
    if not listening(server.port):
        info.proof.append(f"127.0.0.1:{server.port} refused connections")
    new_pid = server.start_again(timeout=timeout)
    info.up_at = time.time()
    info.new_pid = record.restarted_pid = new_pid
    info.down_s = info.up_at - info.down_at
    record.ready_after_s = info.up_at - record.at
    info.proof.append(f"pid {new_pid} {server.answers} on 127.0.0.1:{server.port} after {info.down_s:.2f} s")


def sent_before(record: FaultRecord, times: Mapping[str, tuple[float, ...]]) -> FaultRecord:
    """The record with the executed tasks sent before the broker went down, and those of them that
    started after it came back, from the ledger's (enqueued, started, finished) times (the enqueue
    time is the driver's send time); warm-up ids are the caller's to leave out."""
    info = record.broker_restart
    if info is None or info.down_at is None or info.up_at is None:
        return record
    before = [row for row in times.values() if row[0] < info.down_at]
    kept = sum(1 for row in before if row[1] >= info.up_at)
    update = info.model_copy(update={"sent_before": len(before), "sent_before_ran_after": kept})
    return record.model_copy(update={"broker_restart": update})
