"""The worker's pipelined ledger writer: the same records as Ledger.record, a reply per task, no record
claimed that Redis did not make."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import redis

from taskbench.ledger import RECORD_SHA, Ledger
from taskbench.ledger.pipe import address_of
from taskbench.ledger.writer import LedgerConnectionError, writer_for


def test_records_match_the_redis_py_path(redis_url: str, client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    counter = f"taskbench:{run_id}:counter"

    async def go() -> list[int]:
        writer = writer_for(ledger, redis_url)
        assert writer is not None
        async with writer:
            first = await writer.record("x", 1.0, 2.0, 3.0)
            again = await writer.record("x", 1.0, 2.0, 4.25, incr=(counter, 5))
            return [first, again]

    assert asyncio.run(go()) == [1, 2]
    counts, times = ledger.read(client)
    assert counts == {"x": 2}
    assert times["x"] == (1.0, 2.0, 4.25)
    assert client.hget(ledger.times_key, "x") == b"1.000000 2.000000 4.250000"  # as Ledger.record writes it
    assert int(client.get(counter) or 0) == 5


def test_concurrent_records_are_batched_and_each_task_gets_its_own_count(
        redis_url: str, client: redis.Redis, run_id: str) -> None:
    """Tasks that record at once share writes; every reply goes to the task that sent the command
    (each id twice: the second reply of each says 2)."""
    ledger = Ledger(f"taskbench:{run_id}:")
    ids = [f"t{i}" for i in range(200)]

    async def go() -> tuple[list[int], int, int]:
        writer = writer_for(ledger, redis_url)
        assert writer is not None
        async with writer:
            first = await asyncio.gather(*(writer.record(t, 1.0, 2.0, 3.0) for t in ids))
            second = await asyncio.gather(*(writer.record(t, 1.0, 2.0, 3.0) for t in reversed(ids)))
            commands, writes = writer.stats()
            return [*first, *second], commands, writes

    runs, commands, writes = asyncio.run(go())
    assert runs == [1] * 200 + [2] * 200
    address = address_of(redis_url) or {}  # an embedded test Redis has a password: AUTH is a command too
    handshake = (address.get("password") is not None) + bool(address.get("db")) + 1  # AUTH, SELECT, SCRIPT LOAD
    assert commands == handshake + 400  # the connection's handshake, then the records
    assert writes <= 20  # batched: far fewer writes than records
    counts, _ = ledger.read(client)
    assert counts == dict.fromkeys(ids, 2)


def test_a_server_that_never_saw_the_script_and_a_flushed_script(tmp_path: Path) -> None:
    """SCRIPT LOAD on connecting (the server has no script yet); a SCRIPT FLUSH meanwhile is answered
    NOSCRIPT (the record did not run), so the writer loads it again and records once."""
    from taskbench.harness.brokers.redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-ledger-writer")
    server.start(dict(os.environ))
    sync = redis.Redis.from_url(server.url)  # the embedded server has a password: it is in the URL
    try:
        assert sync.script_exists(RECORD_SHA) == [False]
        ledger = Ledger("taskbench:fresh:")

        async def go() -> list[int]:
            writer = writer_for(ledger, server.url)
            assert writer is not None
            async with writer:
                runs = [await writer.record("a", 1.0, 2.0, 3.0, incr=("taskbench:fresh:counter", 5))]
                sync.script_flush()
                runs.append(await writer.record("a", 1.0, 2.0, 4.0))
                return runs

        assert asyncio.run(go()) == [1, 2]
        counts, _ = ledger.read(sync)
        assert counts == {"a": 2}
        assert int(sync.get("taskbench:fresh:counter") or 0) == 5
    finally:
        sync.close()
        server.stop()


def test_a_lost_connection_fails_the_waiting_records_and_the_next_one_reconnects(
        redis_url: str, client: redis.Redis, run_id: str) -> None:
    """A record whose reply never came raises (its task is not acknowledged, the library runs it again):
    the writer never claims a record it did not see made; the next record opens a new connection."""
    ledger = Ledger(f"taskbench:{run_id}:")

    async def go() -> int:
        writer = writer_for(ledger, redis_url)
        assert writer is not None
        async with writer:
            await writer.record("before", 1.0, 2.0, 3.0)
            proto = writer._pipe._proto
            assert proto is not None and proto.transport is not None
            # a command sent, then the connection cut before its reply is read
            pending = asyncio.ensure_future(writer.record("cut", 1.0, 2.0, 3.0))
            await asyncio.sleep(0)
            proto.transport.abort()
            with pytest.raises(LedgerConnectionError):
                await pending
            return await writer.record("after", 1.0, 2.0, 3.0)

    assert asyncio.run(go()) == 1
    counts, _ = ledger.read(client)
    assert counts["before"] == 1 and counts["after"] == 1
    assert counts.get("cut") in (None, 1)  # it may or may not have reached Redis: the task runs again


def test_an_unreachable_redis_is_an_error_not_a_hang() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    writer = writer_for(Ledger("taskbench:nowhere:"), f"redis://127.0.0.1:{port}/0")
    assert writer is not None

    async def go() -> None:
        async with writer:
            pass

    with pytest.raises(LedgerConnectionError):
        asyncio.run(go())


def test_tls_is_left_to_redis_py() -> None:
    assert writer_for(Ledger("taskbench:tls:"), "rediss://127.0.0.1:6380/0") is None
