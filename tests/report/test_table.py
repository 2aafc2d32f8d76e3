"""The run's terminal table: its drain column says the ledger was on."""

from __future__ import annotations

from rich.console import Console

from taskbench.report.table import render
from tests.report.synthetic import queue_run


def test_the_drain_column_says_the_ledger_was_on() -> None:
    console = Console(record=True, width=200, force_terminal=False)
    render(queue_run(), console)
    text = console.export_text()
    lines = text.splitlines()
    (at,) = [i for i, line in enumerate(lines) if "run in s," in line]
    assert "ledger on" in lines[at + 1], "the header's third line"
    assert "each task's worker also wrote its ledger record" in text
    assert "taskbench drain --workload noop --ledger both" in text
