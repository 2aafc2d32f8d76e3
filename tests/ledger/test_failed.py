"""A user's task: an execution that raised is recorded as failed (never lost), with its type and CPU time."""

from __future__ import annotations

import asyncio
import time

import redis
import redis.asyncio as aioredis

from taskbench.ledger import Ledger, audit, failure_name


class PaymentDeclinedError(Exception):
    pass


def test_a_call_that_raised_is_failed_not_lost_and_named_by_type(client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    for i in range(8):
        ledger.record_execution_sync(client, f"t{i}", now, now, now + 0.01, cpu_s=0.002)
    ledger.record_execution_sync(client, "t8", now, now, now + 0.01, cpu_s=0.001,
                                 error=failure_name(ValueError("bad")))
    ledger.record_execution_sync(client, "t9", now, now, now + 0.01, error=failure_name(PaymentDeclinedError()))
    rows = ledger.rows(client)
    report = audit([f"t{i}" for i in range(11)], rows.counts, rows.times, outcomes=ledger.outcomes(client))
    assert (report.failed, report.lost, report.executed) == (2, 1, 10)
    assert report.failed_types == {"ValueError": 1, "tests.ledger.test_failed.PaymentDeclinedError": 1}
    assert report.failed_ids == ["t8", "t9"]
    categories = report.categories()
    assert (categories["ok"], categories["failed"], categories["lost"]) == (8, 2, 1)
    assert report.cpu is not None and report.cpu.count == 9  # t9 was not measured
    summary = report.to_model()
    assert summary.failed == 2 and summary.cpu_ms is not None and summary.cpu_ms.count == 9
    delivered = audit([f"t{i}" for i in range(10)], rows.counts, rows.times, outcomes=ledger.outcomes(client))
    assert delivered.ok and delivered.failed == 2  # failed is the task's own outcome, not the delivery's


def test_failed_executions_are_counted_per_task_and_keep_the_last_type(client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    ledger.record_execution_sync(client, "x", now, now, now, error="KeyError")
    ledger.record_execution_sync(client, "x", now, now, now, error="Weird type!")
    assert ledger.outcomes(client).failed == {"x": (2, "Weird_type_")}
    rows = ledger.rows(client)
    report = audit(["x"], rows.counts, rows.times, outcomes=ledger.outcomes(client))
    assert (report.failed, report.duplicated) == (1, 1)


def test_async_and_sync_record_the_same_and_bad_rows_are_left_out(redis_url: str, client: redis.Redis,
                                                                   run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()

    async def write() -> int:
        async with aioredis.Redis.from_url(redis_url) as aclient:
            await aclient.script_flush()
            return await ledger.record_execution(aclient, "a", now, now, now + 1, cpu_s=0.5, error="OSError")

    assert asyncio.run(write()) == 1
    ledger.record_execution_sync(client, "s", now, now, now + 1, cpu_s=0.5, error="OSError")
    client.hset(ledger.failed_key, "junk", "not a count")
    client.hset(ledger.cpu_key, "junk", "nan")
    found = ledger.outcomes(client)
    assert found.failed == {"a": (1, "OSError"), "s": (1, "OSError")}
    assert found.cpu_s == {"a": 0.5, "s": 0.5}
    assert ledger.read(client)[0] == {"a": 1, "s": 1}


def test_a_start_without_an_end_is_indeterminate_not_lost(client: redis.Redis, run_id: str) -> None:
    ledger = Ledger(f"taskbench:{run_id}:")
    now = time.time()
    for task_id in ("done", "hung", "cut"):
        ledger.record_start_sync(client, task_id, now)
    ledger.record_execution_sync(client, "done", now, now, now + 0.01)
    client.hset(ledger.starts_key, "junk", "not a time")  # a start row that is not one: left out
    rows = ledger.rows(client)
    report = audit(["done", "hung", "cut", "never", "junk"], rows.counts, rows.times,
                   outcomes=ledger.outcomes(client))
    assert (report.executed, report.lost, report.indeterminate) == (1, 2, 2)
    assert report.lost_ids == ["junk", "never"] and report.indeterminate_ids == ["cut", "hung"]
    assert report.indeterminate_since is not None and abs(report.indeterminate_since - now) < 1e-3
    categories = report.categories()
    assert (categories["ok"], categories["lost"], categories["indeterminate"]) == (1, 2, 2)
    assert categories["indeterminate_frac"] == 0.4
    model = report.to_model()
    assert model.indeterminate == 2 and model.categories.indeterminate == 2
