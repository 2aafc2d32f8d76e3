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


class _DepthThatTurnsCancelIntoAnError:
    """A backend whose client, cancelled inside a command, raises ConnectionError (as redis-py can)."""

    calls = 0

    async def queue_depth(self, settings: object, redis: object) -> int:
        self.calls += 1
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            raise ConnectionError("connection closed while the command was cancelled") from None
        return 3


class _Workloads:
    def __init__(self) -> None:
        self.depths: list[int] = []
        self.redis = object()
        self.metrics = self

    def set_depth(self, depth: int) -> None:
        self.depths.append(depth)


def test_the_depth_watcher_ends_on_its_stop_even_when_the_client_swallows_the_cancellation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    monkeypatch.setattr(worker, "DEPTH_INTERVAL", 0.01)
    backend, workloads = _DepthThatTurnsCancelIntoAnError(), _Workloads()
    settings = SimpleNamespace(broker="redis", broker_address="redis://x", redis_url="redis://x",
                               own_broker_redis=False)

    async def main() -> None:
        stop = asyncio.Event()
        watcher = asyncio.create_task(worker._watch_depth(backend, settings, workloads, stop))  # type: ignore[arg-type]
        while backend.calls < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.02)  # inside a command: the cancellation lands in the client
        stop.set()
        watcher.cancel()
        await asyncio.wait_for(asyncio.shield(watcher), 2.0)  # ends, where it used to run on for good

    asyncio.run(main())
    assert workloads.depths and set(workloads.depths) == {3}
