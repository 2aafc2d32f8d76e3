"""The broker registry: every place a broker's facts are needed reads them from here.

A broker is one entry here (its name, what people call it, its default port and URL, the URL schemes
it takes, how the harness provides it) plus, for a broker the harness can start privately, one
subclass of :class:`taskbench.harness.brokers.base.PrivateServer`. The settings' ``broker`` choices,
the CLI's choices and help, the messages of ``/health`` and of the harness, the delay proxy's
ports and the durability rule all come from :data:`BROKERS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit


@dataclass(frozen=True, kw_only=True)
class BrokerInfo:
    """What every layer may know of a broker without talking to it."""

    name: str  # the value of ``--broker``
    label: str  # what its users call it, in messages
    default_port: int
    schemes: tuple[str, ...]
    #: the URL of the machine's server when ``--broker-url`` is not given and the harness does not start
    #: one (None: never assumed; Redis's is ``--redis-url``'s or the embedded one)
    local_url: str | None = None
    #: with no ``--broker-url``, the harness starts a private server of its own for the run (the embedded
    #: Redis, a private PostgreSQL) instead of using a machine's server
    embedded: bool = False
    #: the durability is read from the server's configuration (Redis's AOF, PostgreSQL's fsync); else the
    #: backends' configuration decides it (:data:`taskbench.durability.BY_CONFIGURATION`)
    reads_durability: bool = False


BROKERS: Final[dict[str, BrokerInfo]] = {
    b.name: b
    for b in (
        BrokerInfo(name="redis", label="Redis", default_port=6379, schemes=("redis", "rediss", "unix"),
                   embedded=True, reads_durability=True),
        BrokerInfo(name="rabbitmq", label="RabbitMQ", default_port=5672, schemes=("amqp", "amqps"),
                   local_url="amqp://guest:guest@127.0.0.1:5672/"),
        BrokerInfo(name="nats", label="NATS", default_port=4222, schemes=("nats", "tls"),
                   local_url="nats://127.0.0.1:4222"),
        BrokerInfo(name="postgres", label="PostgreSQL", default_port=5432, schemes=("postgresql", "postgres"),
                   embedded=True, reads_durability=True),
    )
}

NAMES: Final[tuple[str, ...]] = tuple(BROKERS)


class UnknownBrokerError(ValueError):
    pass


def info(name: str) -> BrokerInfo:
    found = BROKERS.get(name)
    if found is None:
        raise UnknownBrokerError(f"unknown broker {name!r}; known: {', '.join(NAMES)}")
    return found


def address(name: str, url: str) -> tuple[str, int]:
    """(host, port) of a broker URL, the broker's default port where the URL names none."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or info(name).default_port


def describe(name: str, url: str) -> str:
    """``PostgreSQL at 127.0.0.1:5432``: how every message names a broker."""
    host, port = address(name, url)
    return f"{info(name).label} at {host}:{port}"


def check_scheme(name: str, url: str) -> str | None:
    """Why ``url`` cannot be a ``name`` broker's URL (a wrong scheme), or None."""
    scheme = urlsplit(url).scheme
    schemes = info(name).schemes
    if scheme not in schemes:
        return (f"--broker-url {scheme or '(no scheme)'}://… is not a {info(name).label} URL "
                f"(expected {' or '.join(s + '://' for s in schemes)})")
    return None
