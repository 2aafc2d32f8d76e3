"""``task_id`` as an idempotency key: the API claims each id in the run's Redis before it enqueues.

The claim is one ``HSETNX`` on the run's hash ``taskbench:<run id>:ids`` (so the harness's clean-up
of the run prefix deletes it), written before the enqueue, on the answer's deadline. A field's value
says what became of the first submission of that id:

- ``pending <unix time>``: claimed, the enqueue has not reported. While younger than the enqueue
  timeout plus :data:`GRACE` it is in flight; older, its API never wrote the outcome (it was killed,
  or Redis did not answer), and it reads as ``unknown``;
- ``accepted``: the enqueue returned. Not written on the request's path: the ids accepted in the
  last :data:`FLUSH_INTERVAL` are written together, one ``HSET`` for all of them (until then, and
  if the API dies before, the claim reads ``pending``, then ``unknown``);
- ``unknown``: the enqueue timed out (the 503 said so); the broker may hold the task.

A definite failure (a 503 with the broker's error) deletes the field: the id may be sent again.
Best-effort writes (the outcome, the release) wait at most :data:`SETTLE_TIMEOUT`; one that fails
leaves ``pending``, which ages into ``unknown``: never a false ``accepted``, never a second run.

The claims of the requests that arrive together are sent together, as a database's group commit: a
claim waits for the next turn of the event loop and, while a call of claims is out, for that call's
answer; every claim made until then goes to Redis in one script call (one ``HSETNX``, and the
``HGET`` of an id that is known, per id, atomically). So at most :data:`IN_FLIGHT` calls are out at
once and each carries all the claims that arrived while the one before it was out: under load one
round trip for tens of requests instead of one each (a few per call when one turn of the loop was the
only wait: on a slow broker's enqueue, PostgreSQL's, the requests arrive one or two per turn and the
claims cost the API a tenth of its CPU), and a request alone waits one turn of the loop. A claim whose
request gave up (its deadline) before its call went out is not sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Literal, Self

from fastapi import Request
from fastapi.responses import JSONResponse
from redis.exceptions import NoScriptError

from taskbench.service.messages import ErrorResponse, Known

if TYPE_CHECKING:
    from taskbench.settings import Settings

log = logging.getLogger("taskbench.service.claims")

First = Literal["accepted", "pending", "unknown"]
#: seconds beyond the enqueue timeout that a request may spend around its enqueue (parsing, the claim)
GRACE: Final = 2.0
#: longest wait for Redis to take an outcome or a release
SETTLE_TIMEOUT: Final = 0.5
#: Redis calls of the claims at once (and the connections of their client)
CONNECTIONS: Final = 8
#: calls of claims out at once: the claims made meanwhile wait for one of them to answer (group commit)
IN_FLIGHT: Final = 1
#: most ids in one script call
BATCH: Final = 512
#: ``ARGV[1]`` is the value of a new claim, ``ARGV[2..]`` the ids; the answer has, per id, nil when
#: it is claimed now, or the value its first submission left
CLAIM: Final = """
local known = {}
for i = 2, #ARGV do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[1]) == 1 then
    known[i - 1] = false
  else
    known[i - 1] = redis.call('HGET', KEYS[1], ARGV[i])
  end
end
return known
"""
CLAIM_SHA: Final = hashlib.sha1(CLAIM.encode(), usedforsecurity=False).hexdigest()  # Redis names scripts so
#: a Redis command: its arguments in, its reply out (:meth:`taskbench.ledger.pipe.RedisPipe.submit`, a
#: future, or redis-py's ``execute_command``, a coroutine, where the pipe does not speak the URL)
Call = Callable[..., Awaitable[Any]]
#: seconds between the writes of the ids accepted meanwhile (one HSET for all of them)
FLUSH_INTERVAL: Final = 0.05


class KnownTask(Exception):  # noqa: N818 - an answer (409), not a failure
    """A submission of an id this run already knows: answered 409, never enqueued."""

    def __init__(self, task_id: str, first: First) -> None:
        super().__init__(task_id, first)
        self.task_id = task_id
        self.first = first


async def known_task(_: Request, exc: Exception) -> JSONResponse:
    """The 409 of a known id: which id, and what became of its first submission."""
    assert isinstance(exc, KnownTask)
    said = {"accepted": "was accepted", "pending": "is being enqueued",
            "unknown": "has an unknown outcome (its enqueue timed out or was never confirmed)"}[exc.first]
    body = Known(detail=f"task {exc.task_id!r} was already submitted in this run; the first submission {said}: "
                        "not enqueued again", task_id=exc.task_id, first=exc.first)
    return ErrorResponse(status_code=409, content=body.model_dump())


class Claims:
    """The API's record of the task ids of one run, in the run's (the ledger's) Redis.

    An async context manager: it flushes the accepted ids every :data:`FLUSH_INTERVAL` while open,
    and once more when it closes.
    """

    def __init__(self, call: Call, settings: Settings) -> None:
        self._call = call
        self.key = f"{settings.prefix}ids"
        self._in_flight = settings.enqueue_timeout + GRACE
        self._accepted: list[str] = []
        self._flusher: asyncio.Task[None] | None = None
        self._waiting: list[tuple[str, asyncio.Future[bytes | None]]] = []
        self._calls = asyncio.Semaphore(CONNECTIONS)
        self._sending: set[asyncio.Future[Any]] = set()  # the calls of claims out now (IN_FLIGHT at most)

    async def __aenter__(self) -> Self:
        self._flusher = asyncio.create_task(self._flush_loop())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        while self._sending:  # claims on their way (and those waiting for them): their requests wait
            await asyncio.gather(*self._sending, return_exceptions=True)
        await self._flush()

    async def claim(self, task_id: str) -> None:
        """Make ``task_id`` this request's, or raise KnownTask with what became of its first submission.

        Cancelled (the request's deadline), the id may still be claimed by the call it went out with.
        """
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bytes | None] = loop.create_future()
        if not self._waiting and len(self._sending) < IN_FLIGHT:
            loop.call_soon(self._send_waiting)
        self._waiting.append((task_id, answer))
        first = await answer
        if first is not None:
            raise KnownTask(task_id, self.state(first))

    def _send_waiting(self) -> None:
        if len(self._sending) >= IN_FLIGHT:
            return  # the call out now sends them when it answers (_sent)
        waiting = [(task_id, answer) for task_id, answer in self._waiting if not answer.done()]
        self._waiting = []
        pending = f"pending {time.time():.3f}"
        for start in range(0, len(waiting), BATCH):
            self._send(waiting[start:start + BATCH], ("EVALSHA", CLAIM_SHA, 1, self.key, pending))

    def _send(self, batch: list[tuple[str, asyncio.Future[bytes | None]]], head: tuple[Any, ...]) -> None:
        """One call of the claim script for ``batch``; its answer goes to the batch's requests (a future
        and a callback: no task per call, the pipe answers a future of its own)."""
        # kept in _sending until it answers (ruff cannot see that a set holds it)
        sending: asyncio.Future[Any] = asyncio.ensure_future(  # noqa: RUF006
            self._call(*head, *(task_id for task_id, _ in batch)))
        self._sending.add(sending)
        sending.add_done_callback(partial(self._sent, batch, head))

    def _sent(self, batch: list[tuple[str, asyncio.Future[bytes | None]]], head: tuple[Any, ...],
              call: asyncio.Future[list[bytes | None]]) -> None:
        self._sending.discard(call)
        if call.cancelled():
            for _, answer in batch:
                answer.cancel()
        elif (exc := call.exception()) is not None:
            if isinstance(exc, NoScriptError) and head[0] == "EVALSHA":
                # Redis does not know the script (a restart, SCRIPT FLUSH): it did not run; EVAL loads it
                self._send(batch, ("EVAL", CLAIM, *head[2:]))
                return
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(exc)
        else:
            for (_, answer), first in zip(batch, call.result(), strict=True):
                if not answer.done():  # a request whose deadline passed is gone: its id reads "pending"
                    answer.set_result(first)
        if self._waiting:
            self._send_waiting()

    def state(self, value: bytes | str) -> First:
        text = value.decode() if isinstance(value, bytes) else value
        if text == "accepted":
            return "accepted"
        kind, _, at = text.partition(" ")
        try:
            young = kind == "pending" and time.time() - float(at) <= self._in_flight
        except ValueError:
            young = False
        return "pending" if young else "unknown"

    def accepted(self, task_id: str) -> None:
        """The enqueue returned: written with the next flush, off the request's path."""
        self._accepted.append(task_id)

    async def unknown(self, task_id: str) -> None:
        """The enqueue timed out: a retry is told the outcome is unknown."""
        await self._settle(task_id, "unknown")

    async def release(self, task_id: str) -> None:
        """The enqueue failed for certain: the id may be submitted again."""
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT), self._calls:
                await self._call("HDEL", self.key, task_id)
        except Exception as exc:  # it ages into "unknown": a retry is refused, never run twice
            log.warning("could not release the claim of %s: %r", task_id, exc)

    async def _settle(self, task_id: str, outcome: First) -> None:
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT), self._calls:
                await self._call("HSET", self.key, task_id, outcome)
        except Exception as exc:  # it ages into "unknown"
            log.warning("could not record %s for %s: %r", outcome, task_id, exc)

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            await self._flush()

    async def _flush(self) -> None:
        if not self._accepted:
            return
        batch, self._accepted = self._accepted, []
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT), self._calls:
                await self._call("HSET", self.key, *(part for task_id in batch for part in (task_id, "accepted")))
        except Exception as exc:  # they age into "unknown": refused, never run twice
            log.warning("could not record %d accepted task ids: %r", len(batch), exc)
