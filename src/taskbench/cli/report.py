"""``taskbench report``: render a result file of ``run`` or of ``run --scenario``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from taskbench.cli._common import fail
from taskbench.terminal import console, json_text, printable

if TYPE_CHECKING:
    from taskbench.results import Result


def report(
    result: Annotated[Path | None, typer.Argument(help="a result.json written by `taskbench run`")] = None,
    format: Annotated[str, typer.Option(
        "--format", help="table | json | markdown (scenarios) | html (one self-contained page)")] = "table",
    out_file: Annotated[Path | None, typer.Option(
        "--out-file", help="html: the file to write (default: report.html beside the result)")] = None,
    output: Annotated[Path | None, typer.Option(help="--index: the results folder (default results/)")] = None,
    index: Annotated[bool, typer.Option(
        "--index", help="rebuild index.html of every result under the results folder (default results/)")] = False,
) -> None:
    """Render a result file (of `run`, or of `run --scenario`; older schemas are read too)."""
    from taskbench.results import ResultFormatError, load

    if output is not None and not index:
        fail("--output is the results folder of --index; the page of --format html is --out-file")
    if index:
        from taskbench.report.index import write_index

        folder = output or (result if result is not None and result.is_dir() else Path("results"))
        if not folder.is_dir():
            fail(f"{folder} is not a folder of results")
        try:
            path, count = write_index(folder, warn=lambda text: typer.secho(f"taskbench: {printable(text)}", err=True,
                                                                            fg=typer.colors.YELLOW))
        except OSError as exc:
            fail(f"cannot write {folder / 'index.html'}: {exc.strerror}")
        typer.echo(f"{path}: {count} result(s)")
        return
    if result is None:
        fail("give a result.json (or --index)")
    if format not in ("table", "json", "markdown", "html"):
        fail(f"--format must be table, json, markdown or html, not {format!r}")
    try:
        data = load(result)
    except ResultFormatError as exc:
        fail(str(exc))
    if format == "html":
        from taskbench.report.html import render as render_html

        target = out_file or result.with_name("report.html")
        write_or_fail(target, render_html(data))
        typer.echo(str(target))
        return
    if format == "json":
        sys.stdout.write(json_text(data.to_json()) + "\n")
        return
    if data.kind == "overhead":
        from taskbench.report import overhead

        if format == "markdown":
            fail("--format markdown renders scenario results; this is an `overhead` result")
        overhead.render(data, console())
        return
    if data.kind == "scenario":
        from taskbench.report import scenario as scenario_report

        if format == "markdown":
            sys.stdout.write(printable(scenario_report.markdown(data)))
        else:
            scenario_report.render(data, console())
        return
    if format == "markdown":
        fail("--format markdown renders scenario results; this is a `run` result")

    from taskbench.report.table import render

    render(data, console())


def write_or_fail(target: Path, text: str) -> None:
    """Write a page the user asked for (atomically, never through a link planted at its name); a folder that
    is missing, read-only or full is one line."""
    from taskbench.files import write_atomic

    try:
        write_atomic(target, text)
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")


def publish(result: Result, path: Path, folder: Path, say: Callable[[str], None]) -> None:
    """After a run: ``report.html`` beside ``result.json`` and the folder's ``index.html`` brought up to date.

    A report that cannot be drawn costs the page, never the run: its result file is already written.
    """
    from taskbench.files import write_atomic
    from taskbench.report.html import render as render_html
    from taskbench.report.index import write_index

    try:
        target = write_atomic(path.with_name("report.html"), render_html(result.redacted()))
        index, _ = write_index(folder)
    except Exception as exc:
        say(f"report.html not written: {type(exc).__name__}: {exc}")
        return
    say(f"report: {target} (index: {index})")
