"""The brokers of a run: the servers the harness starts privately, and the checks of anyone else's.

Every server the harness owns is a :class:`~.base.PrivateServer` (start, ready, kill, start again on
the same port and secret, stop): the embedded Redis (:mod:`.redis`, whose :func:`~.redis.provide_redis`
gives a run its ledger's and broker's servers), RabbitMQ (:mod:`.rabbitmq`), NATS (:mod:`.nats`) and
PostgreSQL (:mod:`.postgres`). :func:`provide_broker` starts one of them for a block.

A private RabbitMQ/NATS server is started for a fault that stops, freezes or restarts the broker
(``--fault restart-broker@T`` or ``stall-broker@T+D`` with ``--broker rabbitmq|nats`` and no
``--broker-url``), so the machine's shared brokers are never touched; a PostgreSQL broker without
``--broker-url`` is always a private server (it is embedded, as Redis is). :mod:`.delay_proxy` puts
a delay line in front of any of them (``--broker-delay``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from taskbench import brokers, durability
from taskbench.backends import BackendInfo
from taskbench.durability import Durability
from taskbench.harness import HarnessError
from taskbench.harness.brokers.base import PrivateServer
from taskbench.harness.brokers.nats import PrivateNats
from taskbench.harness.brokers.postgres import PrivatePostgres, check_postgres, postgres_durability
from taskbench.harness.brokers.rabbitmq import PrivateRabbit
from taskbench.harness.brokers.redis import EmbeddedRedis, broker_durability, check_reachable

__all__ = ["PrivateServer", "case_durability", "check_broker", "find_broker_server", "needs_private_broker",
           "private_broker", "provide_broker"]

#: the broker -> the class of its private server
SERVERS: dict[str, type[PrivateServer]] = {
    "redis": EmbeddedRedis, "rabbitmq": PrivateRabbit, "nats": PrivateNats, "postgres": PrivatePostgres,
}


def _server_class(kind: str) -> type[PrivateServer]:
    cls = SERVERS.get(kind)
    if cls is None:
        raise ValueError(f"no private server for broker {kind!r}")
    return cls


def private_broker(kind: str, folder: Path, cpus: list[int] | None = None, **options: str) -> PrivateServer:
    """A private server of ``kind`` (redis | rabbitmq | nats | postgres), its log and data in ``folder``,
    not started yet. ``options``: Redis's ``fsync``, PostgreSQL's ``durability``."""
    cls = _server_class(kind)
    make: Callable[..., PrivateServer] = EmbeddedRedis.for_broker if cls is EmbeddedRedis else cls
    return make(folder, cpus, **options)


def find_broker_server(kind: str) -> str:
    """The server binary a private ``kind`` broker would run; a HarnessError naming it when it is missing."""
    return _server_class(kind).locate()


def needs_private_broker(broker: str, broker_url: str | None, fault_target: str | None) -> bool:
    """A fault that stops, freezes or restarts a RabbitMQ/NATS broker, with no --broker-url: a private server.
    A PostgreSQL broker with no --broker-url is always a private server (it is embedded, as Redis is).
    The broker Redis is never one of these: :func:`~.redis.provide_redis` gives the run's."""
    if broker == "postgres":
        return not broker_url
    return broker in ("rabbitmq", "nats") and not broker_url and fault_target == "broker"


@contextlib.contextmanager
def provide_broker(kind: str, folder: Path, *, cpus: list[int] | None = None,
                   say: Callable[[str], None] = lambda _: None, **options: str) -> Iterator[PrivateServer]:
    """A private ``kind`` server for the block, started and always stopped (its group, by its id)."""
    server = private_broker(kind, folder, cpus, **options)
    started = time.monotonic()
    server.start(dict(os.environ))
    say(f"private {kind} server {server.binary} on {server.address} (ready in "
        f"{time.monotonic() - started:.1f} s; keeps {server.persistence})")
    try:
        yield server
    finally:
        server.stop()


def check_broker(broker: str, url: str, timeout: float = 3.0) -> None:
    """Redis: a PING; PostgreSQL: a login; RabbitMQ, NATS: a TCP connect. A missing or refusing server is
    named with host and port."""
    if broker == "redis":
        check_reachable(url, timeout)
        return
    wrong = brokers.check_scheme(broker, url)
    if wrong:
        raise HarnessError(wrong)
    where = brokers.describe(broker, url)
    if broker == "postgres":
        check_postgres(url, timeout)
        return
    try:
        socket.create_connection(brokers.address(broker, url), timeout=timeout).close()
    except OSError as exc:
        raise HarnessError(f"cannot reach {where}: {exc.strerror or exc}; start one or point at one "
                           f"with --broker-url") from None


def case_durability(backend: BackendInfo, enqueue_mode: str, broker: str, client: Any,
                    broker_url: str | None = None) -> Durability:
    """A case's ``durable`` flag and its reason: the backend, the enqueue mode, the broker's configuration
    (``client``: the broker Redis's; ``broker_url``: the broker's, for a PostgreSQL one)."""
    if broker == "redis":
        found = broker_durability(client)
    elif broker == "postgres":
        found = postgres_durability(broker_url or "")
    else:
        found = durability.BY_CONFIGURATION[broker]
    return durability.of_case(backend.durable, enqueue_mode, found, unsafe=backend.unsafe)
