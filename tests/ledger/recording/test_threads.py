"""The ledger's records made in a library's own threads: the same records as the loop's writer, a
connection per thread, a reply per task, no record claimed that Redis did not make; and which bodies a
worker runs in the library's thread."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from taskbench.ledger import RECORD_SHA, Ledger
from taskbench.ledger.recording import Threading
from taskbench.ledger.recording.threads import UNCONFIRMED, thread_records_for
from taskbench.ledger.writer import LedgerConnectionError
from taskbench.messages import NOOP, TaskMessage
from taskbench.settings import Settings
from taskbench.workloads import Workloads


def test_records_match_the_loop_writer_s(redis_url: str, client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    counter = f"taskbench:{run_id}:counter"
    records = thread_records_for(ledger, redis_url)
    assert records is not None
    try:
        assert records.record("x", 1.0, 2.0, 3.0) == 1
        assert records.record("x", 1.0, 2.0, 4.25, incr=(counter, 5)) == 2
        records.incrby(counter, 3)  # the ledger-off path's own INCRBY
    finally:
        records.close()
    counts, times = ledger.read(client)
    assert counts == {"x": 2}
    assert times["x"] == (1.0, 2.0, 4.25)
    assert client.hget(ledger.times_key, "x") == b"1.000000 2.000000 4.250000"  # as Ledger.record writes it
    assert int(client.get(counter) or 0) == 8


def test_each_thread_has_its_connection_and_each_task_its_count(
        redis_url: str, client: redis.Redis, run_id: str) -> None:
    """Ten threads record 100 tasks each, twice: every reply goes to the thread that asked (the second
    record of every id says 2), one connection a thread, all closed by close()."""
    ledger = Ledger(f"taskbench:{run_id}:")
    records = thread_records_for(ledger, redis_url)
    assert records is not None
    names: set[str] = set()

    def work(thread: int) -> list[int | None]:
        names.add(threading.current_thread().name)
        ids = [f"t{thread}-{i}" for i in range(100)]
        return [records.record(t, 1.0, 2.0, 3.0) for t in ids] + [records.record(t, 1.0, 2.0, 3.0) for t in ids]

    try:
        with ThreadPoolExecutor(max_workers=10) as pool:
            runs = list(pool.map(work, range(10)))
        assert all(r == [1] * 100 + [2] * 100 for r in runs)
        assert len(records._open) == len(names) > 1
    finally:
        records.close()
    assert not records._open
    counts, _ = ledger.read(client)
    assert len(counts) == 1000 and set(counts.values()) == {2}
    with pytest.raises(LedgerConnectionError):  # closed: no new connection is made
        records.record("late", 1.0, 2.0, 3.0)


def test_a_server_that_never_saw_the_script_and_a_flushed_script(tmp_path: Path) -> None:
    """SCRIPT LOAD on connecting (with the embedded server's password); a SCRIPT FLUSH meanwhile is
    answered NOSCRIPT (the record did not run), so the record loads it again and runs once."""
    from taskbench.harness.brokers.redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-ledger-thread")
    server.start(dict(os.environ))
    sync = redis.Redis.from_url(server.url)
    records = thread_records_for(Ledger("taskbench:fresh:"), server.url)
    assert records is not None
    try:
        assert sync.script_exists(RECORD_SHA) == [False]
        assert records.record("a", 1.0, 2.0, 3.0, incr=("taskbench:fresh:counter", 5)) == 1
        sync.script_flush()
        assert records.record("a", 1.0, 2.0, 4.0) == 2
        counts, _ = Ledger("taskbench:fresh:").read(sync)
        assert counts == {"a": 2}
        assert int(sync.get("taskbench:fresh:counter") or 0) == 5
    finally:
        records.close()
        sync.close()
        server.stop()


def test_a_lost_connection_fails_the_record_and_the_next_one_reconnects(
        redis_url: str, client: redis.Redis, run_id: str) -> None:
    """A record whose reply never came raises (its task is not counted run; the library runs it again):
    nothing is claimed that Redis was not seen to make; the thread's next record connects again."""
    ledger = Ledger(f"taskbench:{run_id}:")
    records = thread_records_for(ledger, redis_url)
    assert records is not None
    try:
        assert records.record("before", 1.0, 2.0, 3.0) == 1
        connection = records._local.connection
        connection.sock.shutdown(socket.SHUT_RDWR)  # cut, as a Redis that went away
        with pytest.raises(LedgerConnectionError):
            records.record("cut", 1.0, 2.0, 3.0)
        assert records.record("after", 1.0, 2.0, 3.0) == 1
        assert records._local.connection is not connection
    finally:
        records.close()
    counts, _ = ledger.read(client)
    assert counts["before"] == 1 and counts["after"] == 1
    assert counts.get("cut") is None


def test_an_unreachable_redis_is_an_error_not_a_hang() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    records = thread_records_for(Ledger("taskbench:nowhere:"), f"redis://127.0.0.1:{port}/0")
    assert records is not None
    with pytest.raises(LedgerConnectionError, match=f"cannot connect to the ledger's Redis at 127.0.0.1:{port}"):
        records.record("a", 1.0, 2.0, 3.0)


def test_tls_is_left_to_the_loop() -> None:
    assert thread_records_for(Ledger("taskbench:tls:"), "rediss://127.0.0.1:6380/0") is None


@pytest.mark.parametrize(("ledger", "confirm_later"), [(True, False), (False, False), (True, True), (False, True)])
def test_a_worker_runs_loop_free_bodies_in_the_library_s_thread(
        ledger: bool, confirm_later: bool, redis_url: str, client: redis.Redis, run_id: str) -> None:
    """Once the backend says its tasks run in its library's threads, a no-op and a delay-free io/simple run in the calling thread (their record,
    or ledger off their INCRBY, there); a body that needs the loop is left to it. Confirmed later (Huey's
    worker): the same records, in Redis once the Workloads closed."""
    settings = Settings(redis_url=redis_url, run_id=run_id, ledger=ledger, cpu_iterations=100)
    delayed = Settings(redis_url=redis_url, run_id=run_id, ledger=ledger, io_delay=0.01)

    async def go() -> tuple[list[bool], bool, bool]:
        async with Workloads(settings) as workloads, Workloads(delayed) as waiting:
            task = TaskMessage(task_id="before", workload=NOOP, value=1, enqueued_at=0.0)
            before = workloads.run_here(task)  # no library thread announced: the loop runs everything
            # one Redis for the ledger and the broker: a library that acknowledges nothing (Huey) confirms later
            workloads.recorder.tasks_run(Threading.THREADS, acknowledges=not confirm_later)
            waiting.recorder.tasks_run(Threading.THREADS, acknowledges=not confirm_later)
            tasks = [TaskMessage(task_id="n", workload=NOOP, value=1, enqueued_at=0.0),
                     TaskMessage(task_id="i", workload="io/simple", value=3, enqueued_at=0.0),
                     TaskMessage(task_id="c", workload="cpu/simple", value=1, enqueued_at=0.0)]
            ran = await asyncio.to_thread(lambda: [workloads.run_here(t) for t in tasks])
            slow = await asyncio.to_thread(
                waiting.run_here, TaskMessage(task_id="d", workload="io/simple", value=1, enqueued_at=0.0))
            return ran, before, slow

    ran, before, slow = asyncio.run(go())
    assert ran == [True, True, False] and before is False and slow is False
    assert int(client.get(f"{settings.prefix}counter") or 0) == 3
    counts, _ = Ledger(settings.prefix).read(client)
    if ledger:
        assert counts == {"n": 1, "i": 1}
    else:  # counted in the process, flushed to the done counter when the Workloads closed
        assert counts == {} and int(client.get(f"{settings.prefix}done") or 0) == 2


# -- confirm_later: Huey's records, written before the task returns and answered at a later record -----------


def test_records_confirmed_later_all_land_and_a_second_run_is_counted(
        redis_url: str, client: redis.Redis, run_id: str) -> None:
    """Four threads, more records each than a connection leaves unanswered: no record waits for its reply, every
    record and INCRBY is in Redis once close() has read the rest, and a task run twice calls ``repeated``
    with its workload (when its reply is read, not before)."""
    ledger = Ledger(f"taskbench:{run_id}:")
    counter = f"taskbench:{run_id}:counter"
    repeated: list[str] = []
    records = thread_records_for(ledger, redis_url, confirm_later=True, repeated=repeated.append)
    assert records is not None
    per_thread = 3 * UNCONFIRMED + 5

    def work(thread: int) -> list[int | None]:
        replies = [records.record(f"t{thread}-{i}", 1.0, 2.0, 3.0, incr=(counter, 1), workload="io/simple")
                   for i in range(per_thread)]
        records.incrby(counter, 10)  # the ledger-off path's INCRBY: its reply read later too
        replies.append(records.record(f"t{thread}-0", 1.0, 2.0, 4.0, workload="noop"))  # run again
        assert 0 < len(records._local.connection.unconfirmed) <= UNCONFIRMED
        return replies

    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = list(pool.map(work, range(4)))
    assert all(reply is None for thread in replies for reply in thread)  # nobody waited for a count
    records.close()
    assert not records._open
    counts, times = ledger.read(client)
    assert len(counts) == 4 * per_thread
    assert {task for task, runs in counts.items() if runs != 1} == {f"t{t}-0" for t in range(4)}
    assert all(counts[f"t{t}-0"] == 2 and times[f"t{t}-0"] == (1.0, 2.0, 4.0) for t in range(4))
    assert int(client.get(counter) or 0) == 4 * (per_thread + 10)
    assert repeated == ["noop"] * 4


def test_a_flushed_script_is_loaded_again_for_the_records_answered_noscript(tmp_path: Path) -> None:
    """Records sent after a SCRIPT FLUSH are answered NOSCRIPT when their replies are read (they did not run):
    sent again then, each runs once."""
    from taskbench.harness.brokers.redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-ledger-later")
    server.start(dict(os.environ))
    sync = redis.Redis.from_url(server.url)
    ledger = Ledger("taskbench:later:")
    records = thread_records_for(ledger, server.url, confirm_later=True)
    assert records is not None
    try:
        records.record("a", 1.0, 2.0, 3.0)
        sync.script_flush()
        for i in range(UNCONFIRMED + 3):  # the first read of replies meets the NOSCRIPTs
            records.record(f"b{i}", 1.0, 2.0, 3.0, incr=("taskbench:later:counter", 1))
        records.close()
        counts, _ = ledger.read(sync)
        assert counts == {"a": 1, **{f"b{i}": 1 for i in range(UNCONFIRMED + 3)}}
        assert int(sync.get("taskbench:later:counter") or 0) == UNCONFIRMED + 3
    finally:
        records.close()
        sync.close()
        server.stop()


def test_a_lost_connection_names_the_records_it_may_have_lost_and_the_next_reconnects(
        redis_url: str, client: redis.Redis, run_id: str, caplog: pytest.LogCaptureFixture) -> None:
    """Replies lost with the connection: each task whose record's reply was not read is logged by id (the audit
    counts it lost if Redis did not run it); nothing raises in a later task, whose record connects again."""
    ledger = Ledger(f"taskbench:{run_id}:")
    records = thread_records_for(ledger, redis_url, confirm_later=True)
    assert records is not None
    try:
        records.record("before", 1.0, 2.0, 3.0)
        connection = records._local.connection
        for i in range(UNCONFIRMED - 1):
            records.record(f"cut{i}", 1.0, 2.0, 3.0)
        read = connection.reply
        replies = 0

        def cut_after_three() -> object:  # the connection goes away after three replies were read
            nonlocal replies
            replies += 1
            if replies > 3:
                raise ConnectionError("Redis closed the connection")
            return read()

        connection.reply = cut_after_three
        with caplog.at_level(logging.ERROR, logger="taskbench.ledger"):
            records.record("after", 1.0, 2.0, 3.0)  # reads the replies first: the connection is gone
        assert records._local.connection is not connection
    finally:
        records.close()
    # the three replies read confirmed theirs; every later one is named, with the reason
    named = [record.getMessage().split("the record of task ")[1].split(" ")[0] for record in caplog.records]
    sent = ["before", *(f"cut{i}" for i in range(UNCONFIRMED - 1))]
    assert named == sent[3:]
    assert all("reply lost" in record.getMessage() for record in caplog.records)
    counts, _ = ledger.read(client)
    assert counts["after"] == 1  # and the others as Redis ran them: written before the cut, they did run
    assert set(counts) == {"before", "after", *(f"cut{i}" for i in range(UNCONFIRMED - 1))}


_KILLED_AFTER_WRITE = """
import os, signal, sys
from taskbench.ledger import Ledger
from taskbench.ledger.recording.threads import UNCONFIRMED, thread_records_for
records = thread_records_for(Ledger(sys.argv[2]), sys.argv[1], confirm_later=True)
for i in range(int(sys.argv[3])):
    records.record(f"k{i}", 1.0, 2.0, 3.0)
os.kill(os.getpid(), signal.SIGKILL)  # at once, replies unread: what a SIGKILL right after a task's return does
"""


@pytest.mark.parametrize("count", [1, 2, UNCONFIRMED + 1])
def test_a_process_killed_right_after_a_record_s_write_loses_no_record(
        count: int, redis_url: str, client: redis.Redis, run_id: str) -> None:
    """The records are in the kernel once written: a process killed before reading a reply (its socket reset by
    the unread replies) still leaves every record in Redis: a killed Huey worker's finished tasks are not lost."""
    prefix = f"taskbench:{run_id}:"
    for attempt in range(5):
        ledger = Ledger(f"{prefix}{attempt}:")
        done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_WRITE, redis_url, ledger.prefix, str(count)],
                              timeout=60, check=False)
        assert done.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while len(ledger.read(client)[0]) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ledger.read(client)[0] == {f"k{i}": 1 for i in range(count)}


@pytest.mark.parametrize(("redis_url", "broker_url", "acknowledges", "later"), [
    ("redis://127.0.0.1:7001/0", "redis://127.0.0.1:7001/0", True, False),  # one Redis: each reply waited for
    ("redis://127.0.0.1:7001/0", "redis://127.0.0.1:7001/0", False, True),  # Huey: nothing acknowledged after
    ("redis://127.0.0.1:7001/0", "redis://127.0.0.1:7002/0", True, True),  # the ledger's own server
    ("redis://127.0.0.1:7001/0", "amqp://guest:guest@127.0.0.1:5672/", True, True),  # a broker that is no Redis
])
def test_a_record_s_reply_is_waited_for_only_where_the_library_acknowledges_on_the_ledger_s_redis(
        redis_url: str, broker_url: str, acknowledges: bool, later: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend says only where its library runs tasks and whether it acknowledges them; the ledger's recorder
    decides from that and from the servers whether a reply is waited for."""
    import redis.asyncio as aioredis

    from taskbench.backends._worker import blocking_execute
    from taskbench.backends.base import WorkerContext
    from taskbench.ledger.recording import Recorder, seam

    asked: list[bool] = []
    monkeypatch.setattr(seam, "thread_records_for",
                        lambda ledger, url, *, confirm_later, repeated: asked.append(confirm_later))

    async def nothing(task: TaskMessage) -> None: ...

    async def ready() -> None: ...

    async def go() -> None:
        settings = Settings(redis_url=redis_url, broker_url=broker_url, run_id="t")
        recorder = Recorder(settings, client=aioredis.Redis.from_url(redis_url), sync_client=redis.Redis.from_url(redis_url),
                            slots=asyncio.Semaphore(1), counter_key="t:counter", repeated=lambda workload: None)
        ctx = WorkerContext(settings=settings, execute=nothing, ready=ready, recording=recorder)
        blocking_execute(ctx, acknowledges=acknowledges)

    asyncio.run(go())
    assert asked == [later]


def test_same_redis_compares_servers_not_databases() -> None:
    from taskbench.ledger.pipe import same_redis

    assert same_redis("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/3")
    assert same_redis("redis://localhost", "redis://localhost:6379/0")
    assert same_redis("unix:///tmp/r.sock", "unix:///tmp/r.sock?db=2")
    assert not same_redis("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6380/0")
    assert not same_redis("unix:///tmp/r.sock", "redis://127.0.0.1:6379/0")
    assert not same_redis("redis://127.0.0.1:6379/0", "amqp://guest:guest@127.0.0.1:5672/")
