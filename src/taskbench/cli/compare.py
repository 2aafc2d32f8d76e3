"""``taskbench compare A.json B.json [...]``: every later run against the first; exit 1 on a regression."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taskbench.cli._common import fail
from taskbench.cli.report import write_or_fail


def parse_threshold(text: str) -> float:
    """``5%`` -> 0.05: a percentage, always with its sign.

    A bare number was read two ways (``0.99`` as 99 %, ``1`` as 1 %), and ``nan`` or ``inf`` switched
    the gate off (no change is beyond either); so only ``N%`` with 0 <= N < 100 is taken (100 % or more
    could never call an RPS drop worse).
    """
    import math

    value = text.strip()
    if not value.endswith("%"):
        fail(f"--threshold takes a percentage with its sign, like 5% or 0.5%, not {text!r}")
    try:
        number = float(value[:-1])
    except ValueError:
        fail(f"--threshold takes a percentage like 5%, not {text!r}")
    if not math.isfinite(number) or not 0 <= number < 100:
        fail(f"--threshold must be a percentage from 0% to below 100%, not {text!r}")
    return number / 100.0


def check_alpha(value: float) -> float:
    """``--alpha``: a significance level in (0, 0.5]; NaN passed click's range check (every comparison
    with NaN is false) and made every p-value significant."""
    import math

    if not math.isfinite(value) or not 1e-6 <= value <= 0.5:
        raise typer.BadParameter(f"must be between 1e-06 and 0.5, not {value}")
    return value


def compare(
    results: Annotated[list[Path], typer.Argument(help="two or more result.json files; the first is the baseline")],
    threshold: Annotated[str, typer.Option(
        help="smallest change that counts, a percentage with its sign: 5% (and beyond the noise)")] = "5%",
    alpha: Annotated[float, typer.Option(help="significance level of the Mann–Whitney U test (1e-06 to 0.5)",
                                         callback=check_alpha)] = 0.05,
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
        write_or_fail(target, render_html(loaded, labels, comparisons, threshold=limit, alpha=alpha))
        console.print(str(target), markup=False)
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
