"""Live progress: plain lines off a terminal (CI logs), a rich display on one; never a failed run."""

from __future__ import annotations

import io
import time

from rich.console import Console

from taskbench.harness import progress
from taskbench.harness.progress import Reporter


def test_plain_lines_with_counts_rate_and_eta() -> None:
    out = io.StringIO()
    reporter = Reporter(Console(file=out, force_terminal=False, width=200), every=0.05)
    done = iter(range(0, 1000, 10))
    with reporter.phase("[arq] drain", total=500, executed=lambda: next(done)):
        time.sleep(0.3)
    text = out.getvalue()
    assert "[arq] drain: executed" in text and "/500" in text and "/s, ETA" in text
    assert "[arq] drain: done in" in text


def test_a_failing_counter_and_the_live_display_do_not_break_the_phase() -> None:
    out = io.StringIO()
    reporter = Reporter(Console(file=out, force_terminal=True, width=120), every=0.05)

    def broken() -> int:
        raise ConnectionError("redis went away")

    with reporter.phase("load", duration=0.2, executed=broken):
        time.sleep(0.2)
    assert "load: done in" in out.getvalue()


def test_without_a_reporter_a_phase_does_nothing() -> None:
    progress.install(None)
    with progress.phase("load", total=3):
        pass
