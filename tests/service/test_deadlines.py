"""The request path's deadlines behave as asyncio.timeout_at: a late block times out, others do not,
a cancellation from elsewhere stays a cancellation, and a task can be bounded again afterwards."""

from __future__ import annotations

import asyncio

import pytest

from taskbench.service.deadlines import Deadlines


def test_a_block_past_its_deadline_times_out_and_a_quick_one_does_not() -> None:
    async def main() -> None:
        deadlines = Deadlines()
        loop = asyncio.get_running_loop()
        try:
            start = loop.time()
            with pytest.raises(TimeoutError), deadlines.at(start + 0.2):
                await asyncio.sleep(5)
            took = loop.time() - start
            assert 0.2 <= took < 5, took  # never early; the deadline, not the sleep's end, cut it
            with deadlines.at(loop.time() + 1):  # the same task, bounded again: nothing left over
                await asyncio.sleep(0.01)
            assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
            await asyncio.sleep(0.3)  # no stray cancellation arrives later
        finally:
            deadlines.close()

    asyncio.run(main())


def test_many_tasks_each_get_their_own_deadline() -> None:
    async def one(deadlines: Deadlines, delay: float, bound: float) -> str:
        loop = asyncio.get_running_loop()
        try:
            with deadlines.at(loop.time() + bound):
                await asyncio.sleep(delay)
        except TimeoutError:
            return "timeout"
        return "done"

    async def main() -> list[str]:
        deadlines = Deadlines()
        try:
            # margins a busy machine's late loop cannot cross: 0.01 s of work within 1 s, 10 s of it not
            return await asyncio.gather(*(one(deadlines, 10 if i % 2 else 0.01, 1.0) for i in range(200)))
        finally:
            deadlines.close()

    results = asyncio.run(main())
    assert results == ["timeout" if i % 2 else "done" for i in range(200)]


def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    async def main() -> None:
        deadlines = Deadlines()
        loop = asyncio.get_running_loop()

        async def bounded() -> None:
            with deadlines.at(loop.time() + 10):
                await asyncio.sleep(10)

        try:
            task = asyncio.create_task(bounded())
            await asyncio.sleep(0.05)
            task.cancel()  # the server shutting down, say
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            deadlines.close()

    asyncio.run(main())


def test_deadlines_do_not_nest_and_need_a_task() -> None:
    async def main() -> None:
        deadlines = Deadlines()
        loop = asyncio.get_running_loop()
        try:
            inner = deadlines.at(loop.time() + 1)
            with deadlines.at(loop.time() + 1), pytest.raises(RuntimeError, match="do not nest"):
                inner.__enter__()
            outside: list[BaseException] = []

            def callback() -> None:  # a plain callback of the loop: no task to cancel
                try:
                    deadlines.at(loop.time() + 1).__enter__()
                except RuntimeError as exc:
                    outside.append(exc)

            loop.call_soon(callback)
            await asyncio.sleep(0.01)
            assert outside and "inside a task" in str(outside[0])
        finally:
            deadlines.close()

    asyncio.run(main())
