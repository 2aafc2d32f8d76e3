"""A Redis connection of one's own, written as a group commit: for the calls on a hot path.

redis-py's asyncio client takes a connection from its pool, packs the command and parses the reply in
Python and wraps the call in its retry and timeout machinery: about 60 µs of the caller's CPU per
call (py-spy, docs/benchmarks.md), a quarter of a no-op task's in a worker's ledger record and a tenth
of the reference API's CPU per request in the task-id claim beside a PostgreSQL queue's enqueue. Here
the command is packed by hiredis (or once, ahead: :func:`pack`), and the connection is written as a
group commit: the commands sent while none is unanswered leave together at the end of the loop's
turn; those sent while a batch is unanswered wait for its last reply and then leave together. One
write (and about one read) serves a batch, which grows with the load, and a lone command waits for no
timer. The replies, read in the order the commands were sent, resolve the callers' futures.

``hold``: a batch may wait that many more turns of the loop for commands before it leaves (0: none),
and ``batch``: one that big leaves at once. A busy worker's tasks reach their records a turn or a few
apart, so with no hold each record left alone (1.0 a write for Taskiq and FastStream): a write and a
read a task. An idle loop's turns take microseconds, so a held lone command is not kept waiting.

Users: the worker's ledger records (:mod:`taskbench.ledger.writer`) and the API's task-id claims
(:mod:`taskbench.service.claims`).

What a caller sees is redis-py's: a reply error raises :class:`redis.exceptions.ResponseError` (a
``NOSCRIPT``, its ``NoScriptError``), a lost connection fails every command waiting for its reply with
:class:`PipeConnectionError` (a redis-py ``ConnectionError`` and a built-in one; the caller cannot know
whether such a command ran), and the next command connects again. A command has no timeout of its
own: the caller bounds it. A URL the pipe does not speak (TLS: ``rediss://``) is left to redis-py:
:func:`address_of` returns None.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any, cast

import hiredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

#: what a pipe's ``on_connect`` is handed: send one command on the new connection, a future of its reply
Send = Callable[..., "asyncio.Future[Any]"]


class PipeConnectionError(RedisConnectionError, ConnectionError):
    """The pipe's connection was lost or could not be made (redis-py's and Python's ConnectionError)."""


class _Protocol(asyncio.Protocol):
    """One Redis connection, written as a group commit (see the module's docstring)."""

    def __init__(self, hold: int = 0, batch: int = 0) -> None:
        self.transport: asyncio.Transport | None = None
        self.hold = hold  # loop turns a batch may wait for more commands
        self._batch = batch  # a batch this big leaves at once (0: no bound)
        self._turns = 0
        self.loop = asyncio.get_running_loop()
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._reader = hiredis.Reader()
        self._out: list[bytes] = []
        self._scheduled = False
        self._unanswered = 0  # commands written whose replies have not come yet
        self.lost: BaseException | None = None
        self.commands = 0
        self.writes = 0  # commands / writes: the mean batch

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio's, but have its methods
        self.transport = cast("asyncio.Transport", transport)

    def call(self, command: bytes) -> asyncio.Future[Any]:
        """Send ``command`` (packed); the future of its reply."""
        future = self.loop.create_future()
        if self.lost is not None:
            future.set_exception(PipeConnectionError(f"Redis connection lost: {self.lost!r}"))
            return future
        self._out.append(command)
        self.waiting.append(future)
        if not self._scheduled and not self._unanswered:
            self._schedule()
        return future

    def _schedule(self) -> None:
        self._scheduled = True
        self._turns = 0
        self.loop.call_soon(self._tick)

    def _tick(self) -> None:
        """At the end of a loop turn: write the batch, or let it wait one more turn for more commands."""
        if self._turns < self.hold and self._out and not (self._batch and len(self._out) >= self._batch):
            self._turns += 1
            self.loop.call_soon(self._tick)
        else:
            self._write()

    def _write(self) -> None:
        self._scheduled = False
        if not self._out or self.transport is None or self.lost is not None:
            return
        out, self._out = self._out, []
        self._unanswered += len(out)
        self.commands += len(out)
        self.writes += 1
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        while (reply := reader.gets()) is not False:
            self._unanswered -= 1
            future = self.waiting.popleft()
            if future.done():  # its caller gave up meanwhile
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(reply_error(str(reply)))
            else:
                future.set_result(reply)
        if not self._unanswered and self._out and not self._scheduled:
            self._schedule()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or PipeConnectionError("Redis closed the connection")
        self._out = []
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(PipeConnectionError(f"Redis connection lost: {self.lost!r}"))


class RedisPipe:
    """One connection to the Redis at ``address`` (redis-py's ``parse_url`` of its URL: :func:`address_of`).

    ``on_connect`` runs on every new connection before any command of the caller's (the ledger loads its
    script there); ``attempts`` connections are tried, each within ``timeout`` s, the pause after a
    failed one doubling from ``backoff`` s. Use it from the event loop it was first used on.
    """

    def __init__(self, address: dict[str, Any], *, on_connect: Callable[[Send], Awaitable[None]] | None = None,
                 attempts: int = 3, timeout: float = 5.0, backoff: float = 0.05, hold: int = 0,
                 batch: int = 0) -> None:
        self._address = address
        self._hold = hold
        self._batch = batch
        self._on_connect = on_connect
        self._attempts = attempts
        self._timeout = timeout
        self._backoff = backoff
        self._proto: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None
        self._connects: set[asyncio.Task[None]] = set()
        self.commands = 0
        self.writes = 0  # of the connections closed so far; :meth:`stats` adds the open one's

    def __repr__(self) -> str:
        return f"RedisPipe({where(self._address)})"

    def set_hold(self, turns: int) -> None:
        """From now on a batch waits up to ``turns`` loop turns for more commands (the open connection too)."""
        self._hold = turns
        if self._proto is not None:
            self._proto.hold = turns

    def stats(self) -> tuple[int, int]:
        """Commands sent and writes made, over the pipe's life: commands / writes is the mean batch."""
        proto = self._proto
        if proto is None:
            return self.commands, self.writes
        return self.commands + proto.commands, self.writes + proto.writes

    async def call(self, *args: Any) -> Any:
        """Send one command; its reply (bytes, int, list, None as hiredis gives them)."""
        return await self.submit_packed(hiredis.pack_command(args))

    def submit(self, *args: Any) -> asyncio.Future[Any]:
        """Send one command; a future of its reply (no coroutine, no task while the connection is up)."""
        return self.submit_packed(hiredis.pack_command(args))

    def submit_packed(self, command: bytes) -> asyncio.Future[Any]:
        """:meth:`submit` of a command packed already (:func:`pack`)."""
        proto = self._proto
        if proto is not None and proto.lost is None:
            return proto.call(command)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        sending = loop.create_task(self._send_connected(command, future))  # connect first
        self._connects.add(sending)
        sending.add_done_callback(self._connects.discard)
        return future

    async def connect(self) -> None:
        """Connect now (the first command would)."""
        await self._connect()

    async def aclose(self) -> None:
        for connecting in list(self._connects):
            connecting.cancel()
        proto, self._proto = self._proto, None
        if proto is not None:
            self.commands += proto.commands
            self.writes += proto.writes
            if proto.transport is not None:
                proto.transport.close()

    async def _send_connected(self, command: bytes, future: asyncio.Future[Any]) -> None:
        try:
            proto = await self._connect()
        except BaseException as exc:
            if not future.done():
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if not future.done():
            _chain(proto.call(command), future)

    async def _connect(self) -> _Protocol:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            proto = self._proto
            if proto is not None and proto.lost is None:
                return proto  # another caller connected while this one waited
            if proto is not None:  # lost: its figures stay counted
                self.commands += proto.commands
                self.writes += proto.writes
                self._proto = None
            delay = self._backoff
            for attempt in range(self._attempts):
                try:
                    async with asyncio.timeout(self._timeout):
                        proto = await self._open()
                    break
                except (OSError, TimeoutError, ResponseError, RedisConnectionError) as exc:
                    if attempt == self._attempts - 1:
                        raise PipeConnectionError(f"cannot connect to Redis at {self!r}: {exc!r}") from exc
                    await asyncio.sleep(delay)
                    delay *= 2
            assert proto is not None
            self._proto = proto
            return proto

    def _protocol(self) -> _Protocol:
        return _Protocol(self._hold, self._batch)

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        address = self._address
        if address.get("path"):
            _, proto = await loop.create_unix_connection(self._protocol, address["path"])
        else:
            _, proto = await loop.create_connection(self._protocol, address.get("host", "localhost"),
                                                    int(address.get("port", 6379)))
        try:
            password = address.get("password")
            if password is not None:
                user = address.get("username")
                await proto.call(pack(*(("AUTH", user, password) if user else ("AUTH", password))))
            if address.get("db"):
                await proto.call(pack("SELECT", int(address["db"])))
            if self._on_connect is not None:
                await self._on_connect(lambda *args: proto.call(hiredis.pack_command(args)))
        except BaseException:
            if proto.transport is not None:
                proto.transport.close()
            raise
        return proto


def _chain(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    """``target`` gets ``source``'s outcome when it has one."""

    def copy(done: asyncio.Future[Any]) -> None:
        if target.done():
            return
        if done.cancelled():
            target.cancel()
        elif (exc := done.exception()) is not None:
            target.set_exception(exc)
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)


def reply_error(text: str) -> ResponseError:
    """A reply error as redis-py raises it (NOSCRIPT is its NoScriptError)."""
    if text.startswith("NOSCRIPT "):
        return NoScriptError(text.removeprefix("NOSCRIPT "))
    return ResponseError(text)


def pack(*args: str | int | bytes, count: int | None = None) -> bytes:
    """``args`` as the start of a RESP command of ``count`` arguments (all of it: ``count`` None): the
    constant head of a command packed once, its variable tail appended per call."""
    parts = [b"*%d\r\n" % (len(args) if count is None else count)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def address_of(redis_url: str) -> dict[str, Any] | None:
    """redis-py's reading of ``redis_url`` (host, port or Unix path, password, db); None for a URL the
    pipe does not speak (TLS), which redis-py then serves."""
    from redis.connection import SSLConnection, parse_url

    address: dict[str, Any] = parse_url(redis_url)  # type: ignore[no-untyped-call]
    connection_class = address.get("connection_class")
    if connection_class is not None and issubclass(connection_class, SSLConnection):
        return None
    return address


def same_redis(url: str, other: str) -> bool:
    """Whether two URLs name the same Redis server (its host and port, or its Unix socket); a URL of another
    scheme (``amqp://``, ``nats://``, ``postgresql://``) is no Redis."""
    from redis.connection import parse_url

    try:
        one, two = parse_url(url), parse_url(other)  # type: ignore[no-untyped-call]
    except ValueError:  # not redis://, rediss:// or unix://
        return False
    keys = ("path",) if one.get("path") or two.get("path") else ("host", "port")
    return all(one.get(key, 6379 if key == "port" else None) == two.get(key, 6379 if key == "port" else None)
               for key in keys)


def where(address: dict[str, Any]) -> str:
    """``address`` (:func:`address_of`) as a user names it: its Unix path, or host:port."""
    return str(address.get("path") or f"{address.get('host', 'localhost')}:{address.get('port', 6379)}")


def pipe_for(redis_url: str) -> RedisPipe | None:
    """A pipe to the Redis at ``redis_url``; None for one it does not speak to (TLS)."""
    address = address_of(redis_url)
    return None if address is None else RedisPipe(address)
