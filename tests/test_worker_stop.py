"""The worker's stop watchdog: a stop that outlasts its library's is reported with what the loop awaits."""

from __future__ import annotations

import asyncio
import logging

import pytest

from taskbench import worker


async def _stuck_in_redis_write() -> None:
    await asyncio.Event().wait()  # a reply that never comes


async def _teardown() -> None:
    await _stuck_in_redis_write()


def test_a_stop_that_does_not_end_names_the_await_it_sits_on(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(worker, "STOP_REPORT_S", 0.2)

    async def main() -> None:
        watchdog = worker._stop_watchdog(asyncio.get_running_loop(), "demo")
        try:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(_teardown(), 1.0)
        finally:
            watchdog.cancel()

    with caplog.at_level(logging.WARNING, logger="taskbench.worker"):
        asyncio.run(main())
    [report] = [r.getMessage() for r in caplog.records if "stop has not ended" in r.getMessage()]
    assert "demo worker" in report
    # the chain of awaits, outermost first, down to the coroutine that waits
    assert "_teardown -> " in report and "_stuck_in_redis_write -> " in report, report


def test_a_stop_that_ends_in_time_reports_nothing(monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(worker, "STOP_REPORT_S", 0.2)

    async def main() -> None:
        watchdog = worker._stop_watchdog(asyncio.get_running_loop(), "demo")
        await asyncio.sleep(0.01)
        watchdog.cancel()
        await asyncio.sleep(0.4)

    with caplog.at_level(logging.WARNING, logger="taskbench.worker"):
        asyncio.run(main())
    assert not [r for r in caplog.records if "stop has not ended" in r.getMessage()]
