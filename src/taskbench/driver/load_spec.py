"""What to send (:class:`RequestTemplate`) and how hard (:class:`LoadSpec`)."""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import Literal

MAX_DURATION_S = 3600.0
#: the longest load (a soak of hours: ``taskbench run --soak 6h``); pace, timeouts and stages stay within the hour
MAX_LOAD_S = 86_400.0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class RequestTemplate:
    """One HTTP request, sent over and over.

    ``body`` is a :meth:`str.format` template: ``{task_id}`` and ``{enqueued_at}``
    (``time.time()`` formatted ``%.6f``) are filled in per request, so literal
    braces in JSON must be doubled (``'{{"id": "{task_id}"}}'``).
    Only loopback hosts are accepted unless ``remote`` is set: this tool must never load another
    machine by accident. ``remote`` is for a driver of a distributed run (``taskbench drive --allow-remote``:
    a pod, or a network namespace of ``run --nodes``), sent to the address the user or the harness named.
    """

    host: str
    port: int
    path: str
    method: str = "POST"
    body: str | None = None
    content_type: str = "application/json"
    #: extra header lines, each value a template as ``body`` is: ``taskbench run --target`` sends the
    #: task reference in one (``("X-Taskbench-Task", "{task_id}@{enqueued_at}")``)
    headers: tuple[tuple[str, str], ...] = ()
    remote: bool = False

    def __post_init__(self) -> None:
        if not self.remote and not _is_loopback(self.host):
            raise ValueError(
                f"RequestTemplate.host must be a loopback address (127.0.0.0/8, ::1 or "
                f"'localhost'); refusing to send load to {self.host!r}"
            )
        if not 0 < self.port < 65536:
            raise ValueError(f"port out of range: {self.port}")
        if not self.path.startswith("/"):
            raise ValueError(f"path must start with '/': {self.path!r}")
        if not self.method.isalpha():
            raise ValueError(f"invalid HTTP method: {self.method!r}")
        if self.body is not None:
            # Fail now, not in a worker process, on an unknown placeholder.
            self.body.format(task_id="x", enqueued_at="0")
        for name, value in self.headers:
            if not name or not all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in name):
                raise ValueError(f"invalid header name: {name!r}")
            filled = value.format(task_id="x", enqueued_at="0")
            if "\r" in filled or "\n" in filled or not filled.isascii():
                raise ValueError(f"header {name}: the value must be one line of ASCII, got {value!r}")

    @property
    def connect_host(self) -> str:
        """Address to connect to; 'localhost' is pinned to 127.0.0.1 to skip DNS."""
        return "127.0.0.1" if self.host == "localhost" else self.host

    def head_prefix(self) -> bytes:
        """Request line and fixed headers, up to (not including) Content-Length."""
        return self.head_start() + b"Content-Length: "

    def head_start(self) -> bytes:
        """Request line and fixed headers: where the per-request :attr:`headers` follow."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (
            f"{self.method.upper()} {self.path} HTTP/1.1\r\n"
            f"Host: {host}:{self.port}\r\n"
            f"Content-Type: {self.content_type}\r\n"
        ).encode("latin-1")

    def header_lines(self) -> str:
        """The :attr:`headers` as lines, a template as ``body`` is ("" without any)."""
        return "".join(f"{name}: {value}\r\n" for name, value in self.headers)


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stretch of an open-model load's rate schedule (a phase of ``taskbench run --phases``).

    ``rate`` arrivals per second for ``duration`` seconds (0: none, the load pauses). ``id_prefix`` goes
    before the task ids sent in it: a warm-up's ``wp`` keeps its tasks out of the audit, as the warm-up's
    ``w`` does. The driver keeps each stage's counts and latency apart (``LoadResult.stages``), so a
    figure can leave a stage out.
    """

    duration: float
    rate: float
    id_prefix: str = ""

    def __post_init__(self) -> None:
        if not 0 < self.duration <= MAX_DURATION_S:
            raise ValueError(f"a stage's duration must be in (0, {MAX_DURATION_S:.0f}] seconds")
        if not 0 <= self.rate <= 1e6:
            raise ValueError("a stage's rate must be in [0, 1e6] per second")
        if not self.id_prefix.isascii() or any(c.isspace() for c in self.id_prefix):
            raise ValueError("a stage's id_prefix must be ASCII without whitespace")


@dataclass(frozen=True, kw_only=True)
class LoadSpec:
    """Load model and bounds.

    - ``closed``: ``users`` connections, each sends its next request as soon as
      the previous response arrives.
    - ``open``: arrivals at ``rate``/s on a fixed schedule regardless of
      responses, over at most ``users`` connections; latency counts from the
      intended send time (coordinated-omission aware).
    - ``ramp``: like closed, but users are added at ``ramp_per_s`` up to ``users``.

    ``schedule`` (open model): the rate as a list of stages one after the other, in place of ``rate``;
    the load lasts their durations' sum.

    ``pace`` (closed and ramp): each user starts a request at most every ``pace`` seconds, as
    Locust's ``constant_pacing`` does (a user answered in 50 ms waits out the rest of the second).

    ``keepalive`` (closed and ramp): each user keeps its connection for its next request (True), or
    closes it after every answer and connects anew, a TCP handshake a request, as ApacheBench does
    without ``-k`` (False). Latency counts from the send, after the connect.

    Every run is bounded by ``requests`` and/or ``duration`` (whichever first).

    ``share`` (open model): ``(index, count)``, this driver's part of the arrivals: every ``count``-th one
    of the whole load's schedule from ``index`` on (:mod:`taskbench.driver.arrivals`). ``rate`` and
    ``schedule`` stay the whole load's, so the drivers together send exactly its arrivals.
    """

    model: Literal["closed", "open", "ramp"] = "closed"
    users: int = 100
    rate: float | None = None
    ramp_per_s: float = 10.0
    pace: float | None = None
    keepalive: bool = True
    requests: int | None = None
    duration: float | None = None
    processes: int = 1
    timeout: float = 30.0
    id_prefix: str = ""
    schedule: tuple[Stage, ...] = ()
    share: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        index, count = self.share
        if not 0 <= index < count:
            raise ValueError(f"share must be (index, count) with 0 <= index < count, got {self.share!r}")
        if self.model not in ("closed", "open", "ramp"):
            raise ValueError(f"unknown model {self.model!r}")
        if self.schedule:
            if self.model != "open":
                raise ValueError("a rate schedule (stages) needs the open model")
            if self.rate is not None:
                raise ValueError("give a rate or a schedule, not both")
            if self.duration is not None and self.duration != self.scheduled_s:
                raise ValueError("a schedule's load lasts its stages' durations: leave out duration")
        if self.users < 1:
            raise ValueError("users must be >= 1")
        if self.processes < 1:
            raise ValueError("processes must be >= 1")
        if self.processes > self.users:
            raise ValueError("processes must be <= users (each process needs a connection)")
        if self.model == "open" and not self.schedule and (self.rate is None or self.rate <= 0):
            raise ValueError("the open model needs rate > 0")
        if self.model == "ramp" and self.ramp_per_s <= 0:
            raise ValueError("ramp_per_s must be > 0")
        if self.pace is not None and not 0 <= self.pace <= MAX_DURATION_S:
            raise ValueError("pace must be in [0, 3600] seconds")
        if self.pace and self.model == "open":
            raise ValueError("pace applies to the closed and ramp models; the open model has a rate")
        if not self.keepalive and self.model == "open":
            raise ValueError("keepalive false applies to the closed and ramp models (a user connects anew a request)")
        if not self.keepalive and self.pace:
            raise ValueError("keepalive false and a pace: a user that connects anew a request keeps no pace")
        if self.requests is None and self.duration is None and not self.schedule:
            raise ValueError("give requests and/or duration: every load run must be bounded")
        if self.requests is not None and self.requests < 0:
            raise ValueError("requests must be >= 0")
        if self.duration is not None and not 0 < self.duration <= MAX_LOAD_S:
            raise ValueError(f"duration must be in (0, {MAX_LOAD_S:.0f}] seconds")
        if not 0 < self.timeout <= MAX_DURATION_S:
            raise ValueError("timeout must be in (0, 3600] seconds")
        if not self.id_prefix.isascii() or any(c.isspace() for c in self.id_prefix):
            raise ValueError("id_prefix must be ASCII without whitespace")

    @property
    def scheduled_s(self) -> float:
        """The schedule's length: its stages' durations added (0 without one)."""
        return sum(stage.duration for stage in self.schedule)

    @property
    def max_duration(self) -> float:
        """Issuing stops after this many seconds even if ``requests`` is not reached."""
        if self.schedule:
            return min(self.scheduled_s, MAX_DURATION_S)
        return self.duration if self.duration is not None else MAX_DURATION_S

    def split(self) -> list[LoadSpec]:
        """Per-process specs: users, ramp and requests divided as evenly as possible; the open model's
        arrivals shared out (:attr:`share`: every n-th one of the whole schedule), not its rate divided."""
        n = self.processes
        index, count = self.share
        out: list[LoadSpec] = []
        for i in range(n):
            users = self.users // n + (1 if i < self.users % n else 0)
            requests = None
            if self.requests is not None:
                requests = self.requests // n + (1 if i < self.requests % n else 0)
            ramp = self.ramp_per_s / n
            out.append(
                dataclasses.replace(
                    self, users=users, requests=requests, ramp_per_s=ramp, processes=1,
                    share=(index + i * count, count * n),
                )
            )
        return out
