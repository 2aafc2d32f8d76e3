"""One way to wait: poll a condition until it holds, a deadline passes, or a check says it never will.

Every loop that used to ``sleep`` and re-check (a process ready, a ledger drained, a port answering)
goes through :func:`wait_until`, so each wait has a bound, a name for its error message, and one
place where the polling interval is chosen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeoutError(TimeoutError):
    """The condition did not hold within the timeout; the message says what was awaited."""


def wait_until(
    condition: Callable[[], T],
    timeout: float,
    *,
    what: str = "the condition to hold",
    interval: float = 0.05,
    abort: Callable[[], str | None] | None = None,
    raise_on_timeout: bool = True,
) -> T | None:
    """Call ``condition`` until it returns a truthy value, which is returned.

    ``abort`` is checked on every pass; a non-empty string it returns ends the wait at once with a
    :class:`WaitTimeoutError` carrying that reason (a process that died will never become ready). When
    ``timeout`` passes, :class:`WaitTimeoutError` names ``what`` was awaited, or with
    ``raise_on_timeout=False`` the last (falsy) value is returned.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if abort is not None:
            reason = abort()
            if reason:
                value = condition()  # what the abort saw may have made it hold (a process waited for to exit)
                if value:
                    return value
                raise WaitTimeoutError(reason)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if raise_on_timeout:
                raise WaitTimeoutError(f"timed out after {timeout:g} s waiting for {what}")
            return value
        time.sleep(min(interval, remaining))
