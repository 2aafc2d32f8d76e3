"""``taskbench report``: render a result file of ``run`` or of ``run --scenario``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from taskbench.cli._common import fail


def report(
    result: Annotated[Path, typer.Argument(help="a result.json written by `taskbench run`")],
    format: Annotated[str, typer.Option("--format", help="table | json | markdown (scenarios)")] = "table",
) -> None:
    """Render a result file (of `run`, or of `run --scenario`; older schemas are read too)."""
    from taskbench.results import ResultFormatError, load

    if format not in ("table", "json", "markdown"):
        fail(f"--format must be table, json or markdown, not {format!r}")
    try:
        data = load(result)
    except ResultFormatError as exc:
        fail(str(exc))
    if format == "json":
        sys.stdout.write(data.to_json() + "\n")
        return
    from rich.console import Console

    if data.kind == "scenario":
        from taskbench.report import scenario as scenario_report

        if format == "markdown":
            sys.stdout.write(scenario_report.markdown(data))
        else:
            scenario_report.render(data, Console())
        return
    if format == "markdown":
        fail("--format markdown renders scenario results; this is a `run` result")

    from taskbench.report.table import render

    render(data, Console())
