"""Polls that outlast a stalled or restarting Redis: an error is "not yet", retried with backoff.

A paused Redis (SIGSTOP, a long fork for a snapshot, a failover) answers nothing for seconds; a
restarted one refuses connections, then loads its data. The harness's polls (readiness, warm-up,
drain, the audit's read) and ``taskbench up``'s live loop read Redis through a :class:`Patient`:
while Redis does not answer, a poll says what it waits for, returns "not yet" (its ``default``) and
tries again after 1, 2, 4, then every 5 s, inside the deadline of the wait it is part of
(:func:`taskbench.wait.wait_until`); when Redis answers again it says so. Their clients get a socket
timeout (:func:`redis_client`), so a paused server cannot hold a poll forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from taskbench.wait import wait_until

T = TypeVar("T")
D = TypeVar("D")
Say = Callable[[str], None]

#: how long one Redis call of the harness may wait for an answer (an HMGET of 10,000 ids takes ms)
SOCKET_TIMEOUT = 5.0


def redis_client(url: str, *, timeout: float = SOCKET_TIMEOUT) -> Any:
    """A redis-py client whose calls raise a TimeoutError after ``timeout`` instead of blocking."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


def redis_errors() -> tuple[type[Exception], ...]:
    """What a stalled, restarting or unreachable Redis raises (a bad command or reply is no stall)."""
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def server_of(client: Any) -> str:
    """``Redis at host:port`` (or its socket path) of a redis-py client, for messages."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None) or {}
    if kwargs.get("path"):
        return f"Redis at {kwargs['path']}"
    if kwargs.get("host"):
        return f"Redis at {kwargs['host']}:{kwargs.get('port') or 6379}"
    return "Redis"


class Patient:
    """Calls polls of one server; while it does not answer, each call is "not yet" until the next retry.

    The first failure says ``waiting for <server> [for <purpose>] (no answer for N s: <error>;
    retrying with backoff)`` (``repeat=True``: every failed retry says it, with the time so far);
    the first answer after it says ``<server> answers again after N s``. The retry delays are
    ``first``, doubled each time, capped at ``cap``.
    """

    def __init__(self, server: str, say: Say, *, purpose: str = "", first: float = 1.0, cap: float = 5.0,
                 repeat: bool = False, errors: tuple[type[BaseException], ...] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.server, self.say, self.purpose = server, say, purpose
        self.first, self.cap, self.repeat = first, cap, repeat
        self.errors = errors if errors is not None else redis_errors()
        self.clock = clock
        self.since: float | None = None  # when the first unanswered call started
        self.delay = 0.0
        self.next_try = 0.0
        self.failures = 0  # failed calls in the current stall
        self.error = ""

    @property
    def stalled(self) -> bool:
        return self.since is not None

    def call(self, poll: Callable[[], T], default: D) -> T | D:
        """``poll()``, or ``default`` when it raises one of ``errors`` or the next retry is not due yet."""
        started = self.clock()
        if self.since is not None and started < self.next_try:
            return default
        try:
            value = poll()
        except self.errors as exc:
            self._failed(exc, started)
            return default
        if self.since is not None:
            self.say(f"{self.server} answers again after {self.clock() - self.since:.0f} s")
            self.since, self.delay, self.failures = None, 0.0, 0
        return value

    def status(self) -> str | None:
        """What is awaited and for how long, while the server does not answer; else None."""
        if self.since is None:
            return None
        purpose = f" for {self.purpose}" if self.purpose else ""
        return (f"waiting for {self.server}{purpose} (no answer for {self.clock() - self.since:.0f} s: "
                f"{self.error}; retrying with backoff)")

    def _failed(self, exc: BaseException, started: float) -> None:
        first = self.since is None
        if self.since is None:
            self.since, self.delay = started, self.first
        else:
            self.delay = min(self.cap, self.delay * 2)
        self.failures += 1
        self.error = str(exc) or type(exc).__name__
        self.next_try = self.clock() + self.delay
        if first or self.repeat:
            self.say(self.status() or "")


def read_patiently(poll: Callable[[], T], patient: Patient, timeout: float) -> T | None:
    """``poll()``'s value, retried with the patient's backoff for up to ``timeout`` s; None if it never answered."""
    found = wait_until(lambda: patient.call(lambda: (poll(),), None), timeout,
                       what=f"{patient.server} to answer", raise_on_timeout=False)
    return None if found is None else found[0]
