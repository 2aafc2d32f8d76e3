"""What every broker is asked: the base class of the brokers' modules (:mod:`taskbench.brokers`).

A broker answers questions instead of being compared by name: can it be the ledger's Redis, is a
private server started for each case, does a fault on it need a private server, does a case's cleanup
purge it, can it pause itself, how is it checked and how is its durability read. Everything here is
neutral (the settings, the API and the workers ask it); the private server that the harness starts is
named by :attr:`Broker.server`, a ``"module:attr"`` string the harness imports on use
(:func:`taskbench.harness.brokers.server_class`), so this layer never imports the harness.
"""

from __future__ import annotations

import socket
from typing import Any, ClassVar
from urllib.parse import urlsplit

from taskbench.brokers.durability import Durability
from taskbench.errors import HarnessError
from taskbench.redaction import redact

__all__ = ["Broker"]


class Broker:
    """One broker: its facts (class attributes) and how it is checked and its durability read."""

    name: ClassVar[str]  # the value of ``--broker``
    label: ClassVar[str]  # what its users call it, in messages
    default_port: ClassVar[int]
    schemes: ClassVar[tuple[str, ...]]
    #: the URL of the machine's server when ``--broker-url`` is not given and the harness does not start
    #: one (None: never assumed; Redis's is ``--redis-url``'s or the embedded one)
    local_url: ClassVar[str | None] = None
    #: its server speaks Redis: with no ``--broker-url`` the broker is the ledger's own Redis (or the run's
    #: embedded broker Redis beside it), and a Redis client of the ledger's kind reaches it
    can_be_ledger: ClassVar[bool] = False
    #: with no ``--broker-url`` the harness starts a private server for each case (PostgreSQL: it is
    #: embedded, as Redis is, whose servers are the run's: :func:`taskbench.harness.brokers.redis.provide_redis`)
    private_per_case: ClassVar[bool] = False
    #: a fault that stops, freezes or restarts it needs a private server: the machine's shared one is
    #: never touched (RabbitMQ, NATS)
    fault_needs_private: ClassVar[bool] = False
    #: it has a command that pauses it (Redis's CLIENT PAUSE): ``stall-broker`` needs no process of its own
    pauses_itself: ClassVar[bool] = False
    #: a case's cleanup purges its queues on the broker; else the run's keys go with the ledger's prefix
    purge_on_cleanup: ClassVar[bool] = True
    #: the durability is read from the server's configuration (Redis's AOF, PostgreSQL's fsync); else it is
    #: what the backends configure (:attr:`stated_durability`)
    reads_durability: ClassVar[bool] = False
    stated_durability: ClassVar[Durability | None] = None
    #: its server is a SQL database that keeps a run's queue in a schema of its own: a soak samples the
    #: schema's size and live rows as the broker's growth (PostgreSQL)
    sized_by_schema: ClassVar[bool] = False
    #: what a client says first on connecting (AMQP's protocol header; None: it listens first, as NATS does)
    hello: ClassVar[bytes | None] = None
    #: how its server's first answer starts (a port that accepts and answers nothing, or something else,
    #: is not this broker); None: a TCP connect is the check
    greeting: ClassVar[tuple[bytes, ...] | None] = None
    #: the schemes whose first bytes are TLS: the greeting is not read on them
    tls_schemes: ClassVar[tuple[str, ...]] = ()
    #: the class of its private server, ``"module:attr"``, imported by the harness on use
    server: ClassVar[str]
    #: (the private server's option, the attribute of the run's config that holds it): ``--postgres-durability``
    server_options: ClassVar[tuple[tuple[str, str], ...]] = ()

    # -- facts -----------------------------------------------------------------------------------

    def address(self, url: str) -> tuple[str, int]:
        """(host, port) of a URL of this broker, its default port where the URL names none."""
        parts = urlsplit(url)
        return parts.hostname or "127.0.0.1", parts.port or self.default_port

    def describe(self, url: str) -> str:
        """``PostgreSQL at 127.0.0.1:5432``: how every message names a broker."""
        host, port = self.address(url)
        return f"{self.label} at {host}:{port}"

    def where(self, url: str) -> str:
        """Where a fault's record says the broker is: its URL, redacted (Redis: host and port, or its socket)."""
        return redact(url)

    def check_scheme(self, url: str) -> str | None:
        """Why ``url`` cannot be this broker's URL (a wrong scheme), or None."""
        scheme = urlsplit(url).scheme
        if scheme not in self.schemes:
            return (f"--broker-url {scheme or '(no scheme)'}://… is not a {self.label} URL "
                    f"(expected {' or '.join(s + '://' for s in self.schemes)})")
        return None

    def needs_private_server(self, broker_url: str | None, fault_target: str | None) -> bool:
        """Whether a case on this broker runs on a private server of its own: with no ``--broker-url``,
        always (:attr:`private_per_case`) or for a fault on the broker (:attr:`fault_needs_private`)."""
        if broker_url:
            return False
        return self.private_per_case or (self.fault_needs_private and fault_target == "broker")

    def options_from(self, config: object) -> dict[str, str]:
        """The private server's options (:attr:`server_options`), read from a run's config."""
        return {option: str(getattr(config, attr)) for option, attr in self.server_options}

    def restart_refused(self, fault: str) -> str:
        """Why ``fault`` (``restart-broker``…) cannot restart this broker: it is not a server the harness started."""
        return (f"--fault {fault}: a {self.name} server named with --broker-url is never restarted; without "
                "--broker-url the harness starts a private one for the run")

    # -- talking to it ---------------------------------------------------------------------------

    def check(self, url: str, timeout: float = 3.0) -> None:
        """A HarnessError naming the broker with host and port unless it answers: a TCP connect, then its
        server's first words (:attr:`greeting`) within ``timeout``."""
        wrong = self.check_scheme(url)
        if wrong:
            raise HarnessError(wrong)
        try:
            with socket.create_connection(self.address(url), timeout=timeout) as sock:
                problem = self._greeted(sock, url, timeout)
        except OSError as exc:
            raise HarnessError(f"cannot reach {self.describe(url)}: {exc.strerror or exc}; start one or point "
                               f"at one with --broker-url") from None
        if problem:
            raise HarnessError(f"cannot use {self.describe(url)}: {problem}; is it a {self.label} server?")

    def _greeted(self, sock: socket.socket, url: str, timeout: float) -> str | None:
        """Why the server on ``sock`` is not this broker (None: it greeted as one, or there is no greeting)."""
        if self.greeting is None or urlsplit(url).scheme in self.tls_schemes:
            return None
        if self.hello:
            sock.sendall(self.hello)
        try:
            first = sock.recv(64)
        except TimeoutError:
            return f"it took the connection and answered nothing in {timeout:g} s"
        if not first:
            return "it closed the connection without answering"
        if not first.startswith(self.greeting):
            return "it answered, but not as " + self.label
        return None

    def read_durability(self, *, client: Any = None, url: str = "") -> Durability:
        """What the broker keeps across its restart. ``client``: a Redis client of the broker (Redis);
        ``url``: the broker's URL (PostgreSQL). Here: what the backends configure."""
        assert self.stated_durability is not None, f"{self.name} states no durability"
        return self.stated_durability

    async def read_durability_async(self, *, client: Any = None, url: str = "") -> Durability:
        """:meth:`read_durability` from inside the API's event loop (an asyncio client)."""
        return self.read_durability(client=client, url=url)
