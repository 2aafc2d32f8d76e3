"""The audit must see what went wrong: lost, duplicated, late and unacknowledged tasks."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from taskbench.ledger import RECORD_SHA, Ledger, audit


def test_clean_run_is_reported_clean(client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    for i in range(50):
        ledger.record_sync(client, f"t{i}", now, now + 0.001, now + 0.002)
    counts, times = ledger.read(client)
    report = audit([f"t{i}" for i in range(50)], counts, times)
    assert (report.accepted, report.executed, report.lost, report.duplicated) == (50, 50, 0, 0)
    assert report.ok
    assert report.end_to_end.count == 50
    assert 1.9 <= report.to_dict()["end_to_end_ms"]["p50"] <= 2.1


def test_injected_loss_and_duplication_are_reported(client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    accepted = ["a", "b", "c", "d"]
    for task_id in ("a", "b", "c", "c", "c"):  # d never runs, c runs three times
        ledger.record_sync(client, task_id, now, now, now + 0.01)
    counts, times = ledger.read(client)
    report = audit(accepted, counts, times)
    assert report.lost == 1
    assert report.lost_ids == ["d"]
    assert report.duplicated == 1
    assert report.duplicated_ids == ["c"]
    assert report.extra_executions == 2
    assert report.executed == 3
    assert not report.ok


def test_late_and_unacknowledged(client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    ledger.record_sync(client, "on-time", now, now, now + 1)
    ledger.record_sync(client, "late", now, now, now + 10)
    ledger.record_sync(client, "stray", now, now, now + 1)  # ran, but no 2xx was seen for it
    counts, times = ledger.read(client)
    report = audit(["on-time", "late"], counts, times, deadline=now + 5)
    assert report.late == 1
    assert report.unacknowledged == 1
    assert report.lost == 0


def test_warmup_ids_are_left_out(client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    ledger.record_sync(client, "w0-1", now, now, now)
    ledger.record_sync(client, "w0-1", now, now, now)  # a duplicated warm-up task is not the run's
    ledger.record_sync(client, "0-1", now, now, now)
    counts, times = ledger.read(client)
    report = audit(["w0-1", "0-1"], counts, times, ignore_prefix="w")
    assert (report.accepted, report.duplicated, report.unacknowledged) == (1, 0, 0)


def test_async_record_matches_sync(redis_url: str, client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")

    async def go() -> None:
        conn = aioredis.Redis.from_url(redis_url)
        try:
            await ledger.record(conn, "x", 1.0, 2.0, 3.0)
            await ledger.record(conn, "x", 1.0, 2.0, 4.0)
        finally:
            await conn.aclose()

    asyncio.run(go())
    counts, times = ledger.read(client)
    assert counts == {"x": 2}
    assert times["x"] == (1.0, 2.0, 4.0)
    assert ledger.executed_count(client) == 1


def test_unseen_names_accepted_tasks_not_yet_run_whatever_the_count(client: redis.Redis, run_id: str) -> None:
    # an API killed between enqueue and answer: its tasks run but were never accepted, so the count
    # of executions reaches the number accepted while accepted tasks are still waiting
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    for task_id in ("a", "b", "x", "y"):  # x and y: executed, never accepted
        ledger.record_sync(client, task_id, now, now, now)
    accepted = ["a", "b", "c", "d"]
    assert ledger.executed_count(client) == len(accepted)
    assert ledger.unseen(client, accepted, batch=3) == ["c", "d"]
    ledger.record_sync(client, "c", now, now, now)
    assert ledger.unseen(client, ["c", "d"]) == ["d"]
    assert ledger.unseen(client, []) == []


def test_any_ledger_content_is_audited_never_raised(client: redis.Redis, run_id: str) -> None:
    """The issue's crash: an accepted ``Infinity`` put ``inf`` in the ledger and the audit raised
    OverflowError. Every kind of malformed row is counted as corrupt, with a sample, instead."""
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    for task_id in ("good", "dup", "dup"):
        ledger.record_sync(client, task_id, now, now, now + 0.01)
    client.hset(ledger.count_key, mapping={
        "inf": 1, "nan": 1, "short": 1, "words": 1, "huge": 1, "neg": 1,
        "half": "1.5", "zero": 0, "text": "many", "no-times": 1,
        "bad key!": 1, b"\xff\xfe": 1,
    })
    client.hset(ledger.times_key, mapping={
        "inf": f"{now} {now} inf", "nan": f"nan {now} {now}", "short": f"{now} {now}",
        "words": "a b c", "huge": f"{now} {now} 1e309", "neg": f"-1 {now} {now}",
        "half": f"{now} {now} {now}", "zero": f"{now} {now} {now}", "text": f"{now} {now} {now}",
        "no-count": f"{now} {now} {now}", "bad key!": f"{now} {now} {now}",
    })
    accepted = ["good", "dup", "inf", "nan", "half", "lost"]
    rows = ledger.rows(client)
    report = audit(accepted, rows.counts, rows.times, corrupt=rows.corrupt)
    expected = {"inf", "nan", "short", "words", "huge", "neg", "half", "zero", "text", "no-times",
                "no-count", "bad key!", "\ufffd\ufffd"}
    assert report.corrupt == len(expected)
    assert set(report.corrupt_ids) == expected
    assert "not three finite unix times" in report.corrupt_ids["inf"]
    assert "not a positive integer" in report.corrupt_ids["half"]
    assert report.corrupt_ids["no-times"] == "a count without times"
    assert report.corrupt_ids["no-count"] == "times without a count"
    assert report.corrupt_ids["bad key!"] == "key is not a task id"
    # the rest of the audit still holds: corrupt ids are neither executed, lost nor duplicated
    assert (report.accepted, report.executed, report.lost, report.duplicated) == (3, 2, 1, 1)
    assert report.lost_ids == ["lost"]
    assert report.end_to_end.count == 2
    assert not report.ok
    model = report.to_model()
    assert model.corrupt == len(expected) and not model.ok
    # read() keeps its shape: the valid rows only
    counts, times = ledger.read(client)
    assert counts == {"good": 1, "dup": 2}
    assert set(times) == {"good", "dup"}


def test_audit_takes_raw_values_and_wrong_types(client: redis.Redis, run_id: str) -> None:
    report = audit(["a", "b"], {"a": 1, "b": "x", "c": True, 7: 1},
                   {"a": (1e9, 1e9, 1e9 + 1), "b": (1.0, 2.0, 3.0), "c": None, 7: [1, 2, 3]})
    assert report.corrupt == 2  # b (count) and c (count and times); 7 is a valid id
    assert report.unacknowledged == 1
    ledger = Ledger(f"taskbench:{run_id}:")
    client.set(ledger.count_key, "not a hash")
    rows = ledger.rows(client)
    assert list(rows.corrupt) == [f"*{ledger.count_key}"]
    assert "unreadable" in rows.corrupt[f"*{ledger.count_key}"]
    assert not audit([], rows.counts, rows.times, corrupt=rows.corrupt).ok


def test_jepsen_queue_categories() -> None:
    t = (1e9, 1e9, 1e9 + 1)
    counts = {"a": 1, "b": 1, "c": 2, "x": 1, "y": 1, "w1": 3}
    times = {k: t for k in counts}
    # sent: a b c d accepted; e f failed (503, timeout); x ran after its 503; y was never sent
    report = audit(["a", "b", "c", "d", "w0"], counts, times, failed_ids=["e", "f", "x", "w1"],
                   ignore_prefix="w")
    cats = report.to_model().categories
    assert (cats.attempted, cats.ok, cats.lost, cats.duplicated, cats.unexpected, cats.recovered) == (
        7, 2, 1, 1, 2, 1)
    assert cats.ok_frac == pytest.approx(2 / 7) and cats.unexpected_frac == pytest.approx(2 / 7)
    assert cats.lost_frac == pytest.approx(1 / 7) and cats.duplicated_frac == pytest.approx(1 / 7)
    assert cats.unexpected_ids == ["x", "y"]
    empty = audit([], {}, {}).to_model().categories
    assert (empty.attempted, empty.ok_frac, empty.unexpected) == (0, 0.0, 0)


def test_a_409_is_refused_not_recovered() -> None:
    """A 409 says the id was already submitted: its first submission ran it, so the id is not
    "recovered" (no unknown outcome), and it is counted apart; sent twice with a 2xx, it is ok."""
    t = (1e9, 1e9, 1e9 + 1)
    counts = {"a": 1, "k": 1}
    # a: 202 then 409 (sent twice); k: only a 409 (its first submission came from elsewhere)
    report = audit(["a"], counts, dict.fromkeys(counts, t), failed_ids=["a", "k"], refused_ids=["a", "k"])
    cats = report.to_model().categories
    assert (cats.attempted, cats.ok, cats.unexpected, cats.recovered, cats.refused) == (2, 1, 1, 0, 1)
    assert report.ok


def test_executed_per_second_is_the_drain_as_a_curve() -> None:
    from taskbench.ledger import audit

    start = 1000.0
    times = {f"t{i}": (start, start + 0.1, start + fin) for i, fin in enumerate([0.2, 0.5, 1.5, 3.9, -0.1])}
    counts = dict.fromkeys(times, 1)
    result = audit(list(times), counts, times, start=start).to_model()
    assert result.executed_per_second == [3, 1, 0, 1]
    assert audit(list(times), counts, times).to_model().executed_per_second == []


def test_async_record_loads_its_script_on_a_redis_that_never_saw_it(tmp_path: Path) -> None:
    """EVALSHA first; on NOSCRIPT (a fresh or restarted server) the script is loaded and the record
    made once, the task's INCRBY with it."""
    from taskbench.harness.brokers.redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis.log", name="redis-ledger-fresh")
    server.start(dict(os.environ))
    try:
        ledger = Ledger("taskbench:fresh:")

        async def go() -> list[int]:
            conn = aioredis.Redis.from_url(server.url)
            try:
                assert await conn.script_exists(RECORD_SHA) == [False]
                runs = [await ledger.record(conn, "a", 1.0, 2.0, 3.0, incr=("taskbench:fresh:counter", 5))]
                runs.append(await ledger.record(conn, "a", 1.0, 2.0, 4.0))
                runs.append(await ledger.record(conn, "b", 1.0, 2.0, 3.0, incr=("taskbench:fresh:counter", 2)))
                return runs
            finally:
                await conn.aclose()

        assert asyncio.run(go()) == [1, 2, 1]
        sync = redis.Redis.from_url(server.url)
        try:
            counts, times = ledger.read(sync)
            assert counts == {"a": 2, "b": 1} and times["a"] == (1.0, 2.0, 4.0)
            assert int(sync.get("taskbench:fresh:counter")) == 7
        finally:
            sync.close()
    finally:
        server.stop()
