"""Live progress: plain lines off a terminal (CI logs), a rich display on one; never a failed run."""

from __future__ import annotations

import io

from rich.console import Console

from taskbench.harness import progress
from taskbench.harness.progress import Reporter
from taskbench.wait import wait_until


def test_plain_lines_with_counts_rate_and_eta() -> None:
    out = io.StringIO()
    reporter = Reporter(Console(file=out, force_terminal=False, width=200), every=0.05)
    done = iter(range(0, 1000, 10))
    with reporter.phase("[arq] drain", total=500, executed=lambda: next(done)):
        wait_until(lambda: "/s, ETA" in out.getvalue(), 30, what="a progress line")
    text = out.getvalue()
    assert "[arq] drain: executed" in text and "/500" in text and "/s, ETA" in text
    assert "[arq] drain: done in" in text


def test_a_failing_counter_and_the_live_display_do_not_break_the_phase() -> None:
    out = io.StringIO()
    reporter = Reporter(Console(file=out, force_terminal=True, width=120), every=0.05)

    calls: list[int] = []

    def broken() -> int:
        calls.append(1)
        raise ConnectionError("redis went away")

    with reporter.phase("load", duration=0.2, executed=broken):
        wait_until(lambda: len(calls) >= 2, 30, what="the display to read the counter")  # once at the start
    assert "load: done in" in out.getvalue()


def test_without_a_reporter_a_phase_does_nothing() -> None:
    progress.install(None)
    with progress.phase("load", total=3):
        pass
