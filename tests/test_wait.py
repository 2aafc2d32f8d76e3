"""wait_until: returns the first truthy value, names what it waited for, stops early on abort."""

from __future__ import annotations

import itertools

import pytest

from taskbench.wait import WaitTimeoutError, wait_until


def test_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "done", timeout=5, interval=0) == "done"


def test_timeout_names_what_was_awaited() -> None:
    with pytest.raises(WaitTimeoutError, match="the API on port 1 answering"):
        wait_until(lambda: False, timeout=0.05, what="the API on port 1 answering", interval=0.01)


def test_timeout_without_raising_returns_the_last_value() -> None:
    assert wait_until(lambda: 0, timeout=0.02, interval=0.01, raise_on_timeout=False) == 0


def test_abort_ends_the_wait_with_its_reason() -> None:
    with pytest.raises(WaitTimeoutError, match="worker-0 exited with code 1"):
        wait_until(lambda: False, timeout=60, abort=lambda: "worker-0 exited with code 1")


def test_a_condition_that_holds_by_the_abort_s_time_wins() -> None:
    """A process waited for to exit, exiting between the condition's check and the abort's: the wait is over,
    not failed (the drain's case, once in hundreds of rounds)."""
    exited = [False]

    def died() -> str:
        exited[0] = True
        return "drain-case exited with code 0 during start-up"

    assert wait_until(lambda: exited[0], timeout=60, abort=died) is True
