"""The pipelined Redis connection (taskbench.ledger.pipe) on real redis-servers: order, errors, AUTH and
SELECT, a server that goes away and comes back."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.ledger.pipe import pipe_for
from taskbench.wait import wait_until


def test_replies_come_back_to_their_callers_in_order(redis_url: str) -> None:
    key = f"taskbench:test-pipe:{uuid.uuid4().hex}"

    async def main() -> list[object]:
        pipe = pipe_for(redis_url)
        assert pipe is not None
        try:
            # a thousand calls in one turn of the loop: one write, the replies matched in order
            counts = await asyncio.gather(*(pipe.call("INCR", key) for _ in range(1000)))
            mixed = await asyncio.gather(pipe.call("SET", f"{key}:s", "x"), pipe.call("GET", f"{key}:s"),
                                         pipe.call("GET", f"{key}:missing"), pipe.call("DEL", key, f"{key}:s"))
            return [counts, mixed]
        finally:
            await pipe.aclose()

    counts, mixed = asyncio.run(main())
    assert counts == list(range(1, 1001))
    assert mixed == [b"OK", b"x", None, 2]


def test_a_held_batch_takes_the_next_turns_commands_and_leaves_at_its_bound(redis_url: str) -> None:
    """``hold``: a batch waits up to that many loop turns for more commands; ``batch``: one that big
    leaves at once. Five commands, one a turn: the first four leave together, the fifth after the
    hold, once their replies are in (the group commit); a lone command still leaves, with no timer."""
    from taskbench.ledger.pipe import RedisPipe, address_of

    async def main() -> tuple[list[object], int, object, int]:
        address = address_of(redis_url)
        assert address is not None
        pipe = RedisPipe(address, hold=5, batch=4)
        try:
            await pipe.connect()
            _, before = pipe.stats()
            sent = []
            for _ in range(5):
                sent.append(pipe.submit("PING"))
                await asyncio.sleep(0)  # one turn of the loop
            replies = await asyncio.gather(*sent)
            _, after = pipe.stats()
            alone = await asyncio.wait_for(pipe.call("ECHO", "alone"), 10)
            _, last = pipe.stats()
            return replies, after - before, alone, last - after
        finally:
            await pipe.aclose()

    replies, writes, alone, lone_writes = asyncio.run(main())
    assert replies == [b"PONG"] * 5
    assert writes == 2
    assert (alone, lone_writes) == (b"alone", 1)


def test_set_hold_changes_the_open_connections_hold(redis_url: str) -> None:
    """``set_hold(0)`` (a worker whose tasks come from its library's threads): a command leaves at the end
    of its turn on the connection already open; before it, the same command waited the hold out."""
    from taskbench.ledger.pipe import RedisPipe, address_of

    async def main() -> list[int]:
        address = address_of(redis_url)
        assert address is not None
        pipe = RedisPipe(address, hold=20)
        early = []
        try:
            await pipe.connect()
            for hold in (20, 0):
                pipe.set_hold(hold)
                _, before = pipe.stats()
                sent = pipe.submit("PING")
                for _ in range(3):
                    await asyncio.sleep(0)
                early.append(pipe.stats()[1] - before)
                assert await sent == b"PONG"
            return early
        finally:
            await pipe.aclose()

    assert asyncio.run(main()) == [0, 1]


def test_a_reply_error_is_redis_pys_response_error_and_the_connection_goes_on(redis_url: str) -> None:
    key = f"taskbench:test-pipe:{uuid.uuid4().hex}"

    async def main() -> object:
        pipe = pipe_for(redis_url)
        assert pipe is not None
        try:
            with pytest.raises(NoScriptError, match="No matching script"):
                await pipe.call("EVALSHA", "0" * 40, 0)
            with pytest.raises(ResponseError, match="unknown command"):
                await pipe.call("NOT-A-COMMAND")
            await pipe.call("SET", key, "still here")
            return await pipe.call("GETDEL", key)
        finally:
            await pipe.aclose()

    assert asyncio.run(main()) == b"still here"


def test_auth_and_select_follow_the_url(broker_redis_url: str) -> None:
    """The broker fixture's server has a password; the URL's database is selected on connect."""
    key = f"taskbench:test-pipe:{uuid.uuid4().hex}"
    url = broker_redis_url.rsplit("/", 1)[0] + "/3"

    async def main() -> None:
        pipe = pipe_for(url)
        assert pipe is not None
        try:
            await pipe.call("SET", key, "in db 3")
        finally:
            await pipe.aclose()

    asyncio.run(main())
    client = redis.Redis.from_url(url)
    try:
        assert client.getdel(key) == b"in db 3"
    finally:
        client.close()
    assert redis.Redis.from_url(broker_redis_url.rsplit("/", 1)[0] + "/0").get(key) is None


def test_a_wrong_password_is_a_connection_error_that_names_the_server(broker_redis_url: str) -> None:
    parts = broker_redis_url.split("@", 1)
    url = "redis://:wrong@" + parts[1]

    async def main() -> None:
        pipe = pipe_for(url)
        assert pipe is not None
        with pytest.raises(RedisConnectionError, match=r"cannot connect to Redis at RedisPipe\(127\.0\.0\.1:\d+\)"):
            await pipe.call("PING")

    asyncio.run(main())


def test_tls_is_left_to_redis_py() -> None:
    assert pipe_for("rediss://127.0.0.1:6380/0") is None


def test_a_lost_server_fails_the_waiting_calls_and_the_next_call_connects_again(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-pipe-test")
    server.start(dict(os.environ))
    try:
        pipe = pipe_for(server.url)
        assert pipe is not None

        async def main() -> tuple[object, object]:
            assert await pipe.call("PING") == b"PONG"
            # a call waiting for its reply when the server goes: BLPOP blocks until the connection drops
            waiting = pipe.submit("BLPOP", "taskbench:test-pipe:never", 0)
            with redis.Redis.from_url(server.url) as admin:
                await asyncio.to_thread(wait_until, lambda: admin.info("clients")["blocked_clients"] >= 1, 30,
                                        what="the BLPOP to block in the server")
            await asyncio.to_thread(server.stop)
            gone: list[object] = await asyncio.gather(waiting, return_exceptions=True)
            with pytest.raises(RedisConnectionError):
                await pipe.call("PING")  # nobody listens: the reconnection attempts fail
            await asyncio.to_thread(server.start, dict(os.environ))
            try:
                return gone[0], await pipe.call("PING")
            finally:
                await pipe.aclose()

        lost, after = asyncio.run(main())
        assert isinstance(lost, RedisConnectionError)
        assert after == b"PONG"
    finally:
        server.stop()
