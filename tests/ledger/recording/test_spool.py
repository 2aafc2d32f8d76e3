"""The ledger's records from a library's threads, spooled to a file the harness keeps: every record reaches
Redis once, from the worker or, once it is gone, from the harness; a killed worker loses none and a line
forwarded twice runs once."""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, cast

import pytest
import redis

from taskbench.ledger import Ledger
from taskbench.ledger.recording import Threading
from taskbench.ledger.recording.spool import forward as spool_forward
from taskbench.ledger.recording.spool import records as spool_records
from taskbench.ledger.recording.spool.format import BATCH, FIELDS, HEAD, HEADER, READY, SLOT, SPOOL_ENV
from taskbench.ledger.recording.spool.forward import Link, Segment
from taskbench.ledger.recording.spool.keeper import STALE_AFTER, SpoolKeeper, reap
from taskbench.ledger.recording.spool.records import SpoolRecords
from taskbench.ledger.recording.threads import thread_records_for
from taskbench.messages import NOOP, TaskMessage
from taskbench.settings import Settings
from taskbench.workloads import Workloads


def _records(ledger: Ledger, redis_url: str, counter: str, folder: Path, repeated: list[str] | None = None,
             ) -> SpoolRecords:
    fallback = thread_records_for(ledger, redis_url, confirm_later=True)
    assert fallback is not None
    return SpoolRecords(ledger, redis_url, counter, folder, fallback=fallback,
                        repeated=(repeated.append if repeated is not None else lambda workload: None))


def test_records_from_threads_land_once_and_a_second_run_is_counted(
        redis_url: str, client: redis.Redis, run_id: str, tmp_path: Path) -> None:
    """Four threads, 500 records each and 50 of them twice: every record in Redis with its times and its
    increment once the records close, each second run reported by workload, the file gone."""
    ledger = Ledger(f"taskbench:{run_id}:")
    counter = f"taskbench:{run_id}:counter"
    repeated: list[str] = []
    records = _records(ledger, redis_url, counter, tmp_path, repeated)
    assert [p.parent for p in records.paths] == [tmp_path] and records.paths[0].exists()
    assert records._thread is None  # started by the first record

    def work(thread: int) -> None:
        for i in range(500):
            assert records.record(f"t{thread}-{i}", 1.0, 2.0, 3.5, incr=(counter, 2), workload="io/simple") is None
        for i in range(50):
            records.record(f"t{thread}-{i}", 1.0, 2.0, 4.0, workload=NOOP)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(4)))
    records.close()
    counts, times = ledger.read(client)
    assert len(counts) == 2000
    assert sum(counts.values()) == 2200 and {counts[f"t{t}-{i}"] for t in range(4) for i in range(50)} == {2}
    assert times["t0-0"] == (1.0, 2.0, 4.0) and times["t3-499"] == (1.0, 2.0, 3.5)
    assert int(client.get(counter) or 0) == 4000
    assert repeated == [NOOP] * 200
    assert records.paths == [] and list(tmp_path.iterdir()) == []


def test_a_full_file_is_forwarded_removed_and_followed_by_the_next(
        redis_url: str, client: redis.Redis, run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of 100 slots: 1,200 records from four threads fill twelve, each removed once forwarded."""
    for module in (spool_records, spool_forward):  # each reads the number it imported
        monkeypatch.setattr(module, "SLOTS", 100)
    ledger = Ledger(f"taskbench:{run_id}:")
    records = _records(ledger, redis_url, "unused", tmp_path)
    seen: set[str] = set()

    def work(thread: int) -> None:
        for i in range(300):
            records.record(f"t{thread}-{i}", 1.0, 2.0, 3.0, workload=NOOP)
            seen.update(p.name for p in tmp_path.glob("*.spool"))

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(4)))
    records.close()
    # seen as they came (a file made and forwarded between two looks may be missed): numbered 0 to 11
    assert len(seen) >= 2 and {int(name.split("-")[-1].split(".")[0]) for name in seen} <= set(range(12))
    assert list(tmp_path.iterdir()) == []
    counts, _ = ledger.read(client)
    assert len(counts) == 1200 and set(counts.values()) == {1}


_KILLED = """
import os, signal, sys, time
from pathlib import Path
from taskbench.ledger import Ledger
from taskbench.ledger.recording.spool import SpoolRecords
from taskbench.ledger.recording.threads import thread_records_for
ledger = Ledger(sys.argv[2])
records = SpoolRecords(ledger, sys.argv[1], "unused", Path(sys.argv[3]),
                       fallback=thread_records_for(ledger, sys.argv[1], confirm_later=True))
for i in range(int(sys.argv[4])):
    records.record(f"k{i}", 1.0, 2.0, 3.0)
    if i == int(sys.argv[4]) // 2:
        time.sleep(0.05)  # the worker's thread forwards what came so far
os.kill(os.getpid(), signal.SIGKILL)  # at once, what came since unsent: a SIGKILL right after a task's return
"""


@pytest.mark.parametrize("count", [1, 2, 5000])
def test_a_killed_worker_s_records_are_forwarded_by_the_harness_each_once(
        count: int, redis_url: str, client: redis.Redis, run_id: str, tmp_path: Path) -> None:
    """A worker killed right after writing records, some forwarded by itself and some not: the keeper leaves
    its file alone while it lives, then forwards the rest, and each record is in Redis once (a line the
    worker forwarded is not sent again)."""
    prefix = f"taskbench:{run_id}:"
    for attempt in range(3):
        ledger = Ledger(f"{prefix}{attempt}:")
        keeper = SpoolKeeper(str(tmp_path), interval=None)  # sweeps when the test says
        keeper.know(redis_url)  # as the stack does: a header names the URL without its password
        try:
            done = subprocess.run([sys.executable, "-c", _KILLED, redis_url, ledger.prefix, str(keeper.folder),
                                   str(count)], timeout=60, check=False)
            assert done.returncode == -signal.SIGKILL
            keeper.sweep()
            assert ledger.read(client)[0] == {f"k{i}": 1 for i in range(count)}
        finally:
            keeper.close()
        assert not keeper.folder.exists()


def test_a_file_the_stack_cannot_forward_goes_with_it(run_id: str, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The ledger's Redis gone by the time the stack stops: nothing would ever forward the file, so the keeper
    removes it and its folder (no spool left in /dev/shm), and says how many records it held."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ledger = Ledger(f"taskbench:{run_id}:")
    keeper = SpoolKeeper(str(tmp_path), interval=None)
    records = _records(ledger, f"redis://127.0.0.1:{port}/0", "unused", keeper.folder)
    records._stopping = True  # no thread: the records stay in the file
    for i in range(3):
        records.record(f"gone-{i}", 1.0, 2.0, 3.0)
    records.close()  # cannot forward: leaves the file to the harness
    assert len(list(keeper.folder.glob("*.spool"))) == 1
    keeper.close()
    assert not keeper.folder.exists()
    assert "3 records could not be forwarded" in caplog.text
    keeper.close()  # a stack stopped twice: its descriptor is not closed again (another file's by then)


def test_a_killed_harness_s_folder_is_reaped_by_the_next_keeper(tmp_path: Path) -> None:
    """A harness SIGKILLed leaves its folder; the next keeper made beside it removes it (its lock is free), but
    not a live keeper's folder, nor a file a worker of the killed harness still holds."""
    alive = SpoolKeeper(str(tmp_path), interval=None)
    (alive.folder / "mine.spool").write_bytes(b"\0" * (HEADER + SLOT))
    dead = tmp_path / "taskbench-spool-killed"
    dead.mkdir()
    (dead / "w-000000.spool").write_bytes(b"{}\n".ljust(HEADER, b"\0") + b"R".ljust(SLOT, b"\0"))
    orphan = tmp_path / "taskbench-spool-orphan"
    orphan.mkdir()
    held = os.open(orphan / "w-000001.spool", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)  # a worker of a killed harness, still running
    recent = tmp_path / "taskbench-spool-recent"  # unlocked but touched a moment ago: an older keeper's, maybe alive
    recent.mkdir()
    old = time.time() - STALE_AFTER - 1
    for folder in (dead, orphan):
        os.utime(folder, (old, old))
    try:
        later = SpoolKeeper(str(tmp_path), interval=None)
        assert not dead.exists()
        assert (alive.folder / "mine.spool").exists() and (orphan / "w-000001.spool").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [alive.folder.name, later.folder.name, orphan.name, recent.name])
        later.close()
    finally:
        os.close(held)
    assert reap(tmp_path, keep=alive.folder) == [orphan]
    assert reap(tmp_path, keep=alive.folder, stale_after=0) == [recent]
    (alive.folder / "mine.spool").unlink()
    alive.close()
    assert list(tmp_path.iterdir()) == []


def test_a_live_worker_s_file_is_left_to_it(redis_url: str, client: redis.Redis, run_id: str,
                                            tmp_path: Path) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    keeper = SpoolKeeper(str(tmp_path), interval=None)  # sweeps when the test says
    keeper.know(redis_url)  # as the stack does: a header names the URL without its password
    records = _records(ledger, redis_url, "unused", keeper.folder)
    try:
        records._stopping = True  # no thread starts: nothing is forwarded but at close()
        records.record("mine", 1.0, 2.0, 3.0)
        assert keeper.sweep() == 0 and ledger.read(client)[0] == {}
    finally:
        records.close()
        keeper.close()
    assert ledger.read(client)[0] == {"mine": 1}


def test_a_slot_without_its_mark_is_no_record_and_a_stretch_sent_twice_runs_once(
        redis_url: str, client: redis.Redis, run_id: str, tmp_path: Path) -> None:
    """A slot whose line is in and whose ready mark is not (a kill between the two) is no record: its task had
    not returned. The worker's reader stops there; once the worker is gone the keeper forwards the ready slots
    past it. Two readers of the same file (a worker and the harness, a reply lost) run each slot once: the
    offset moves with the records, in one script."""
    ledger = Ledger(f"taskbench:{run_id}:")
    keeper = SpoolKeeper(str(tmp_path), interval=None)  # sweeps when the test says
    keeper.know(redis_url)  # as the stack does: a header names the URL without its password
    records = _records(ledger, redis_url, "unused", keeper.folder)
    records._stopping = True  # no thread starts: nothing is forwarded
    for i in range(3):
        records.record(f"r{i}", 1.0, 2.0, 3.0)
    hole = next(records._slots)  # reserved, its fields and id stored, its mark not
    at = HEADER + hole * SLOT
    FIELDS.pack_into(records._maps[0], at + 1, 1.0, 2.0, 3.0, 0.0, False, 2, 0)
    records._maps[0][at + HEAD:at + HEAD + 2] = b"r3"
    records.record("r4", 1.0, 2.0, 3.0)
    own = records._files[0]
    path = own.segment.path
    link = Link(own.segment.link.target)
    try:
        first, second = Segment(path, own._read, link), Segment(path, own._read, link)
        assert first.forward(None, holes=False) == 3
        assert second.forward(None, holes=False) == 0 and second.offset == first.offset == 3
    finally:
        link.close()
    own.map.close()
    os.close(own.fd)  # the worker is gone: its lock with it
    if records._fallback is not None:
        records._fallback.close()
    assert keeper.sweep() == 1
    assert not path.exists()
    keeper.close()
    assert ledger.read(client)[0] == {"r0": 1, "r1": 1, "r2": 1, "r4": 1}


def test_a_worker_spools_where_the_harness_names_a_folder(
        redis_url: str, client: redis.Redis, run_id: str, tmp_path: Path) -> None:
    """Confirmed later and with the ledger on, a worker the harness started (``TASKBENCH_LEDGER_SPOOL``) writes
    its loop-free bodies' records to the folder; they are in Redis once its Workloads close, the INCRBY of
    io/simple with them, and the folder is empty again. Waiting for each reply, nothing is spooled."""
    settings = Settings(redis_url=redis_url, run_id=run_id, ledger_spool=str(tmp_path))

    async def go(confirm_later: bool) -> list[str]:
        async with Workloads(settings) as workloads:
            # one Redis for the ledger and the broker: only a library that acknowledges nothing confirms later
            workloads.recorder.tasks_run(Threading.THREADS, acknowledges=not confirm_later)
            tasks = [TaskMessage(task_id=f"{confirm_later}-n", workload=NOOP, value=1, enqueued_at=0.0),
                     TaskMessage(task_id=f"{confirm_later}-i", workload="io/simple", value=3, enqueued_at=0.0)]
            assert await asyncio.to_thread(lambda: [workloads.run_here(t) for t in tasks]) == [True, True]
            return [p.name for p in tmp_path.iterdir()]

    assert len(asyncio.run(go(True))) == 1
    assert asyncio.run(go(False)) == []
    assert list(tmp_path.iterdir()) == []
    counts, _ = Ledger(settings.prefix).read(client)
    assert counts == {"True-n": 1, "True-i": 1, "False-n": 1, "False-i": 1}
    assert int(client.get(f"{settings.prefix}counter") or 0) == 6


def test_the_stack_names_a_folder_and_forwards_a_killed_process_s_file(
        redis_url: str, client: redis.Redis, run_id: str, tmp_path: Path) -> None:
    """Every process a Stack starts is told its folder; killing one forwards what its file holds before
    ``kill`` returns (a fault's restart finds the records in Redis), and the folder goes with the stack."""
    from taskbench.harness.processes.stack import Stack

    ledger = Ledger(f"taskbench:{run_id}:")
    with Stack(dict(os.environ), name=run_id) as stack:
        folder = stack.spool.folder if stack.spool is not None else None
        assert folder is not None and stack.procs.env[SPOOL_ENV] == str(folder)
        script = _KILLED.replace("os.kill(os.getpid(), signal.SIGKILL)", "print('written', flush=True); time.sleep(600)"
                                 ).replace("Path(sys.argv[3])", f"Path(os.environ[{SPOOL_ENV!r}])")
        proc = stack.start("worker-1", [sys.executable, "-c", script, redis_url, ledger.prefix, "-", "200"],
                           tmp_path / "worker.log")
        deadline = time.monotonic() + 60
        while "written" not in proc.tail() and time.monotonic() < deadline:  # its 200 records stored (it then sleeps)
            time.sleep(0.05)
        assert proc.alive() and list(folder.glob("*.spool"))
        stack.procs.kill("worker-1")
        assert ledger.read(client)[0] == {f"k{i}": 1 for i in range(200)}
    assert not folder.exists()
    with Stack({**os.environ, SPOOL_ENV: ""}, name=run_id) as stack:  # the caller's choice: none
        assert stack.spool is None and stack.procs.env[SPOOL_ENV] == ""


def test_a_file_names_its_redis_without_the_password_and_a_flushed_script_is_loaded_again(tmp_path: Path) -> None:
    """The embedded ledger has a password: a spool file's header shows it masked, the keeper forwards a killed
    worker's file with the URL the harness gave, and a SCRIPT FLUSH meanwhile (NOSCRIPT: the batch did not run)
    loads the script again, each record once."""
    from taskbench.harness.brokers.redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-ledger-spool")
    server.start(dict(os.environ))
    sync = redis.Redis.from_url(server.url)
    ledger = Ledger("taskbench:spool-password:")
    keeper = SpoolKeeper(str(tmp_path), interval=None)  # sweeps when the test says
    keeper.know(server.url)
    try:
        password = redis.connection.parse_url(server.url).get("password")  # type: ignore[no-untyped-call]
        assert password
        done = subprocess.run([sys.executable, "-c", _KILLED.replace("time.sleep(0.05)", "time.sleep(0.3)"),
                               server.url, ledger.prefix, str(keeper.folder), "10"], timeout=60, check=False)
        assert done.returncode == -signal.SIGKILL
        files = list(keeper.folder.glob("*.spool"))
        assert len(files) == 1 and password.encode() not in files[0].read_bytes()[:4096]
        forwarded = ledger.read(sync)[0]  # the worker's own batches (the first six, unless it was slow)
        assert forwarded == {f"k{i}": 1 for i in range(len(forwarded))}
        sync.script_flush()
        assert keeper.sweep() == 10 - len(forwarded)
        assert ledger.read(sync)[0] == {f"k{i}": 1 for i in range(10)}
    finally:
        keeper.close()
        sync.close()
        server.stop()


@pytest.mark.parametrize("apart", [True, False])
def test_a_worker_s_loop_spools_its_records_where_the_ledger_is_not_the_broker(
        apart: bool, redis_url: str, client: redis.Redis, run_id: str, tmp_path: Path) -> None:
    """The records of the loop's bodies (no-op, io/simple with its INCRBY, cpu/simple) are stored in a spool file
    when the ledger's Redis is not the broker, and are in Redis once the Workloads close, each once; a ledger
    that is the broker too awaits each record as before (nothing spooled)."""
    broker = "redis://127.0.0.1:1/0" if apart else redis_url
    settings = Settings(redis_url=redis_url, broker_url=broker, run_id=run_id, ledger_spool=str(tmp_path),
                        cpu_iterations=10)

    async def go() -> list[str]:
        async with Workloads(settings) as workloads:
            workloads.recorder.tasks_run(Threading.LOOP)
            for i, workload in enumerate((NOOP, "io/simple", "cpu/simple") * 5):
                await workloads.run(TaskMessage(task_id=f"t{i}", workload=workload, value=2, enqueued_at=1.0))
            return [p.name for p in tmp_path.iterdir()]

    files = asyncio.run(go())
    assert len(files) == (1 if apart else 0)
    assert list(tmp_path.iterdir()) == []
    counts, times = Ledger(settings.prefix).read(client)
    assert counts == {f"t{i}": 1 for i in range(15)} and times["t0"][0] == 1.0
    assert int(client.get(f"{settings.prefix}counter") or 0) == 20


@pytest.mark.parametrize(("choice", "threading", "files"), [
    ("auto", Threading.LOOP, 1), ("on", Threading.LOOP, 1), ("off", Threading.LOOP, 0),
    ("auto", Threading.THREADS, 2), ("off", Threading.THREADS, 1), ("auto", Threading.FORKED, 0)])
def test_the_loop_s_spool_follows_where_the_tasks_run_unless_told(
        choice: str, threading: Threading, files: int, redis_url: str, client: redis.Redis, run_id: str,
        tmp_path: Path) -> None:
    """Where the ledger is not the broker, a worker whose tasks run on its loop spools the loop's records (one
    file), one whose tasks run in its library's threads spools those too (a file each); forked children record
    themselves, the parent spools nothing. ``TASKBENCH_LEDGER_SPOOL_LOOP=off`` awaits the loop's records; either
    way every record is in the ledger once."""
    settings = Settings(redis_url=redis_url, broker_url="redis://127.0.0.1:1/0", run_id=run_id,
                        ledger_spool=str(tmp_path), ledger_spool_loop=cast(Literal["auto", "on", "off"], choice))

    async def go() -> int:
        async with Workloads(settings) as workloads:
            workloads.recorder.tasks_run(threading)
            await workloads.run(TaskMessage(task_id="one", workload=NOOP, value=1, enqueued_at=1.0))
            return len(list(tmp_path.glob("*.spool")))

    assert asyncio.run(go()) == files
    assert Ledger(settings.prefix).read(client)[0] == {"one": 1}


@pytest.mark.parametrize("backend", ["arq", "taskiq"])
def test_every_backend_on_a_loop_spools_the_same(backend: str, redis_url: str, run_id: str, tmp_path: Path) -> None:
    """The recording depends on where the tasks run, never on which library runs them."""
    settings = Settings(backend=backend, redis_url=redis_url, broker_url="redis://127.0.0.1:1/0", run_id=run_id,
                        ledger_spool=str(tmp_path))

    async def go() -> bool:
        async with Workloads(settings) as workloads:
            workloads.recorder.tasks_run(Threading.LOOP)
            await workloads.run(TaskMessage(task_id="one", workload=NOOP, value=1, enqueued_at=1.0))
            return any(tmp_path.glob("*.spool"))

    assert asyncio.run(go()) is True


def test_a_record_reaches_redis_as_the_ledger_writes_it(redis_url: str, client: redis.Redis, run_id: str,
                                                        tmp_path: Path) -> None:
    """The script reads each slot's fields itself (Redis's Lua ``struct``): the times in Redis are the
    ``%.6f`` text every other writer of the ledger writes, an id may hold any character, the increment lands
    once, and a record that does not fit a slot goes to the fallback, in Redis all the same."""
    ledger = Ledger(f"taskbench:{run_id}:")
    counter = f"taskbench:{run_id}:counter"
    records = _records(ledger, redis_url, counter, tmp_path)
    times = (1764412345.123456, 1764412345.5, 1764412399.999999)
    odd = "tab\there\nnewline-é-✓"
    long = "x" * (SLOT - HEAD + 1)
    assert records.store(odd, *times, incr=(counter, 7), workload="io/simple")
    assert not records.store(long, *times)
    assert not records.store("other-key", *times, incr=("another", 1))
    records.record(long, *times)
    records.close()
    assert client.hget(ledger.times_key, odd) == b"%.6f %.6f %.6f" % times
    assert client.hgetall(ledger.count_key) == {odd.encode(): b"1", long.encode(): b"1"}
    assert int(client.get(counter) or 0) == 7
    assert f"== {READY} then" in BATCH and f"#slots, {SLOT} do" in BATCH
