"""The audit must see what went wrong: lost, duplicated, late and unacknowledged tasks."""

from __future__ import annotations

import asyncio
import time

import redis
import redis.asyncio as aioredis

from taskbench.ledger import Ledger, audit


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


def test_executed_per_second_is_the_drain_as_a_curve() -> None:
    from taskbench.ledger import audit

    start = 1000.0
    times = {f"t{i}": (start, start + 0.1, start + fin) for i, fin in enumerate([0.2, 0.5, 1.5, 3.9, -0.1])}
    counts = dict.fromkeys(times, 1)
    result = audit(list(times), counts, times, start=start).to_model()
    assert result.executed_per_second == [3, 1, 0, 1]
    assert audit(list(times), counts, times).to_model().executed_per_second == []
