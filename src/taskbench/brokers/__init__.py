"""The broker registry: every place a broker's facts are needed asks them here, never its name.

A broker is one module of this package, one subclass of :class:`~.base.Broker`: :mod:`.redis`,
:mod:`.rabbitmq`, :mod:`.nats`, :mod:`.postgres`. Its class holds its name, label, schemes and default
port, what the rest of the code asks of it (:attr:`~.base.Broker.can_be_ledger`,
:attr:`~.base.Broker.private_per_case`, :attr:`~.base.Broker.fault_needs_private`,
:attr:`~.base.Broker.pauses_itself`, :attr:`~.base.Broker.purge_on_cleanup`), its check and how its
durability is read and stated (:mod:`.durability` holds the rule of a case). The private server the
harness starts for it is named by :attr:`~.base.Broker.server` (``"module:attr"``, a
:class:`taskbench.harness.brokers.base.PrivateServer` subclass imported on use): this package is in the
bottom, neutral layer (the settings, the API and the workers use it) and imports nothing of the harness.

Use::

    broker = brokers.info(settings.broker)
    if broker.can_be_ledger: ...            # not: settings.broker == "redis"
    broker.check(url); broker.read_durability(client=c, url=url)
"""

from __future__ import annotations

from typing import Final

from taskbench.brokers.base import Broker
from taskbench.brokers.durability import Durability
from taskbench.brokers.nats import Nats
from taskbench.brokers.postgres import Postgres
from taskbench.brokers.rabbitmq import RabbitMQ
from taskbench.brokers.redis import Redis

__all__ = ["BROKERS", "DEFAULT", "NAMES", "Broker", "Durability", "UnknownBrokerError", "address", "check_scheme",
           "describe", "info", "is_default"]

BROKERS: Final[dict[str, Broker]] = {b.name: b for b in (Redis(), RabbitMQ(), Nats(), Postgres())}

NAMES: Final[tuple[str, ...]] = tuple(BROKERS)

#: the broker of a backend that names none, and of a result written before brokers were recorded
DEFAULT: Final[str] = Redis.name


class UnknownBrokerError(ValueError):
    pass


def info(name: str) -> Broker:
    """The broker called ``name``; an UnknownBrokerError (a ValueError) naming the known ones."""
    found = BROKERS.get(name)
    if found is None:
        raise UnknownBrokerError(f"unknown broker {name!r}; known: {', '.join(NAMES)}")
    return found


def is_default(name: str) -> bool:
    """Whether ``name`` is the broker a result leaves unsaid (its rows name only the others)."""
    return name == DEFAULT


def address(name: str, url: str) -> tuple[str, int]:
    """(host, port) of a broker URL, the broker's default port where the URL names none."""
    return info(name).address(url)


def describe(name: str, url: str) -> str:
    """``PostgreSQL at 127.0.0.1:5432``: how every message names a broker."""
    return info(name).describe(url)


def check_scheme(name: str, url: str) -> str | None:
    """Why ``url`` cannot be a ``name`` broker's URL (a wrong scheme), or None."""
    return info(name).check_scheme(url)
