"""The brokers' private servers: the servers the harness starts for a run or a case, one base class.

A broker is a module of :mod:`taskbench.brokers` (its facts, check and durability, in the neutral
layer); the server the harness starts for it is the class its :attr:`~taskbench.brokers.base.Broker.server`
names, here, imported on use by :func:`server_class`. Every server the harness owns is a
:class:`~.base.PrivateServer` (start, ready, kill, start again on the same port and secret, stop): the
embedded Redis (:mod:`.redis`, whose :func:`~.redis.provide_redis` gives a run its ledger's and broker's
servers), RabbitMQ (:mod:`.rabbitmq`), NATS (:mod:`.nats`) and PostgreSQL (:mod:`.postgres`).
:func:`provide_broker` starts one of them for a block; :mod:`.delay_proxy` puts a delay line in front of
any of them (``--broker-delay``).

When a case gets a private server is the broker's to say (:meth:`~taskbench.brokers.base.Broker.needs_private_server`):
a fault that stops, freezes or restarts a RabbitMQ/NATS broker with no ``--broker-url`` (the machine's
shared brokers are never touched), and every PostgreSQL broker with no ``--broker-url``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from taskbench import brokers
from taskbench.backends import BackendInfo
from taskbench.brokers import durability
from taskbench.brokers.durability import Durability
from taskbench.harness.brokers.base import PrivateServer

__all__ = ["PrivateServer", "case_durability", "check_broker", "find_broker_server", "needs_private_broker",
           "private_broker", "provide_broker", "server_class"]


def server_class(kind: str) -> type[PrivateServer]:
    """The class of a ``kind`` broker's private server: its ``server`` reference (``module:attr``), imported."""
    module, _, attr = brokers.info(kind).server.partition(":")
    found = getattr(importlib.import_module(module), attr)
    if not (isinstance(found, type) and issubclass(found, PrivateServer)):
        raise TypeError(f"{kind}'s server {brokers.info(kind).server} is not a PrivateServer")
    return found


def private_broker(kind: str, folder: Path, cpus: list[int] | None = None, **options: str) -> PrivateServer:
    """A private server of ``kind`` (redis | rabbitmq | nats | postgres), its log and data in ``folder``,
    not started yet. ``options``: the broker's ``server_options`` (Redis's ``fsync``, PostgreSQL's
    ``durability``; :meth:`~taskbench.brokers.base.Broker.options_from` reads them from a config)."""
    return server_class(kind).for_broker(folder, cpus, **options)


def find_broker_server(kind: str) -> str:
    """The server binary a private ``kind`` broker would run; a HarnessError naming it when it is missing."""
    return server_class(kind).locate()


def needs_private_broker(broker: str, broker_url: str | None, fault_target: str | None) -> bool:
    """Whether a case on ``broker`` runs on a private server of its own (the broker's
    :meth:`~taskbench.brokers.base.Broker.needs_private_server`). The broker Redis is never one of these:
    :func:`~.redis.provide_redis` gives the run's."""
    return brokers.info(broker).needs_private_server(broker_url, fault_target)


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
    """Redis: a PING; PostgreSQL: a login; RabbitMQ, NATS: a TCP connect (:meth:`~taskbench.brokers.base.Broker.check`).
    A missing or refusing server is named with host and port."""
    brokers.info(broker).check(url, timeout)


def case_durability(backend: BackendInfo, enqueue_mode: str, broker: str, client: Any,
                    broker_url: str | None = None) -> Durability:
    """A case's ``durable`` flag and its reason: the backend, the enqueue mode, the broker's configuration
    (``client``: the broker Redis's; ``broker_url``: the broker's, for a PostgreSQL one)."""
    found = brokers.info(broker).read_durability(client=client, url=broker_url or "")
    return durability.of_case(backend.durable, enqueue_mode, found, unsafe=backend.unsafe)
