"""``taskbench compare A.json B.json [...]``: every later run against the first; exit 1 on a regression."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taskbench.cli._common import fail


def parse_threshold(text: str) -> float:
    """``5%``, ``5`` or ``0.05``: a relative change."""
    value = text.strip().rstrip("%")
    try:
        number = float(value)
    except ValueError:
        fail(f"--threshold takes a percentage like 5%, not {text!r}")
    if number < 0:
        fail("--threshold must not be negative")
    return number / 100.0 if text.strip().endswith("%") or number >= 1 else number


def compare(
    results: Annotated[list[Path], typer.Argument(help="two or more result.json files; the first is the baseline")],
    threshold: Annotated[str, typer.Option(help="smallest change that counts, e.g. 5% (and beyond the noise)")] = "5%",
    alpha: Annotated[float, typer.Option(help="significance level of the Mann–Whitney U test", min=1e-6,
                                         max=0.5)] = 0.05,
    format: Annotated[str, typer.Option("--format", help="table | html")] = "table",
    output: Annotated[Path | None, typer.Option(help="html: the file to write (default compare.html)")] = None,
) -> None:
    """Compare runs case by case: every metric's change, and whether it is beyond the noise.

    Exits 1 when a metric got significantly worse beyond the threshold (RPS down; latency, errors, lost or
    duplicated tasks up), naming the metrics, so it can gate CI.
    """
    from rich.console import Console

    from taskbench.report.compare import compare as compare_results
    from taskbench.report.compare_view import render, render_html
    from taskbench.results import ResultFormatError, load

    if len(results) < 2:
        fail("give at least two result files: the baseline first")
    if format not in ("table", "html"):
        fail(f"--format must be table or html, not {format!r}")
    limit = parse_threshold(threshold)
    try:
        loaded = [load(path) for path in results]
    except ResultFormatError as exc:
        fail(str(exc))
    labels = _labels(results)
    comparisons = [compare_results(loaded[0], other, threshold=limit, alpha=alpha, label_a=labels[0],
                                   label_b=label) for other, label in zip(loaded[1:], labels[1:], strict=True)]
    console = Console()
    if format == "html":
        target = output or Path("compare.html")
        target.write_text(render_html(loaded, labels, comparisons, threshold=limit, alpha=alpha))
        console.print(str(target))
    else:
        for cmp in comparisons:
            render(cmp, console, threshold=limit, alpha=alpha)
    regressions = [(f"{cmp.label_b}: " if len(comparisons) > 1 else "") + name
                   for cmp in comparisons for name in cmp.regressions]
    if not any(cmp.cases for cmp in comparisons):
        fail("no case of the results has the same parameters: nothing to compare")
    if regressions:
        typer.secho("regressed: " + "; ".join(regressions), err=True, fg=typer.colors.RED)
        raise typer.Exit(1)
    typer.echo("no metric got significantly worse", err=True)


def _labels(paths: list[Path]) -> list[str]:
    """Short names: the run folder's name (result.json's parent), unique."""
    names = [p.parent.name if p.name == "result.json" and p.parent.name else p.stem for p in paths]
    if len(set(names)) < len(names):
        names = [f"{chr(ord('A') + i)} {n}" if i < 26 else f"{i} {n}" for i, n in enumerate(names)]
    return names
