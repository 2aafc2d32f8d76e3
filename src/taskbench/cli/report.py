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
    """Render a result file (of `run`, or of `run --scenario`)."""
    import json

    try:
        data = json.loads(result.read_text())
    except OSError as exc:
        fail(f"cannot read {result}: {exc.strerror}")
    except json.JSONDecodeError as exc:
        fail(f"{result} is not JSON (line {exc.lineno}: {exc.msg})")
    if format == "json":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    if format not in ("table", "markdown"):
        fail(f"--format must be table, json or markdown, not {format!r}")
    from rich.console import Console

    if isinstance(data, dict) and "scenario" in data:
        from taskbench.scenarios import report as scenario_report

        try:
            if format == "markdown":
                sys.stdout.write(scenario_report.markdown(data))
            else:
                scenario_report.render(data, Console())
        except (KeyError, TypeError) as exc:
            fail(f"{result} is not a taskbench scenario result ({type(exc).__name__}: {exc})")
        return
    if format == "markdown":
        fail("--format markdown renders scenario results; this is a `run` result")

    from taskbench.report.table import render

    try:
        render(data, Console())
    except (KeyError, TypeError) as exc:
        fail(f"{result} is not a taskbench result ({exc!r} missing)")
