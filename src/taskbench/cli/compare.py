"""``taskbench compare A.json B.json [...]``: every later run against the first; exit 1 on a regression or on
a breached ``--fail-if`` objective (``compare NEW.json --fail-if ...`` checks one run's objectives alone)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from taskbench.cli._common import fail
from taskbench.cli.report import write_or_fail
from taskbench.terminal import console, json_text, printable
from taskbench.units import Percent

if TYPE_CHECKING:
    from taskbench.report.compare import Comparison
    from taskbench.report.objectives import Objective
    from taskbench.results import Result


def check_alpha(value: float) -> float:
    """``--alpha``: a significance level in (0, 0.5]; NaN passed click's range check (every comparison
    with NaN is false) and made every p-value significant."""
    import math

    if not math.isfinite(value) or not 1e-6 <= value <= 0.5:
        raise typer.BadParameter(f"must be between 1e-06 and 0.5, not {value}")
    return value


def parse_metrics(text: str | None) -> frozenset[str] | None:
    """``--metrics lost,duplicated``: the metrics whose significant worsening fails; ``none``: no metric."""
    from taskbench.report.objectives import GATED

    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["none"]:
        return frozenset()
    unknown = [n for n in names if n not in GATED]
    if unknown or not names:
        fail(f"--metrics: no metric {', '.join(unknown) or repr(text)}; the metrics: {', '.join(GATED)} (or none)")
    return frozenset(names)


def parse_objectives(texts: list[str]) -> list[Objective]:
    from taskbench.report.objectives import ObjectiveError, parse

    try:
        return [parse(text) for text in texts]
    except ObjectiveError as exc:
        fail(str(exc))


def _metric_help() -> str:
    from taskbench.report.objectives import GATED

    return ("only these metrics' significant worsening fails, comma-separated: " + ", ".join(GATED)
            + "; none: only --fail-if and the table (default: every metric)")


def _objective_help() -> str:
    from taskbench.report.objectives import figure_names

    return ("fail when a case of the new result meets METRIC OP VALUE, e.g. 'e2e_p95 > 500ms' or 'lost > 0' "
            "(repeatable; OP < <= > >= == !=; VALUE with ms, s, % or /s, bare: the metric's own unit). "
            "METRIC: " + figure_names())


def compare(
    results: Annotated[list[Path], typer.Argument(
        help="result.json files; the first is the baseline (one alone: only its --fail-if objectives)")],
    fail_if: Annotated[list[str] | None, typer.Option("--fail-if", help=_objective_help())] = None,
    metrics: Annotated[str | None, typer.Option(help=_metric_help())] = None,
    threshold: Annotated[float, typer.Option(
        help="smallest change that counts, in percent: 5 or 5% (and beyond the noise); nan, inf and 100% or "
             "more would switch the gate off and are refused", **Percent(0, 100, below=True).settings())] = 5.0,
    alpha: Annotated[float, typer.Option(help="significance level of the Mann–Whitney U test (1e-06 to 0.5)",
                                         callback=check_alpha)] = 0.05,
    format: Annotated[str, typer.Option("--format", help="table | html | json (the verdict, on stdout)")] = "table",
    out_file: Annotated[Path | None, typer.Option(
        "--out-file", help="html: the file to write (default compare.html)")] = None,
) -> None:
    """Compare runs case by case: every metric's change, and whether it is beyond the noise.

    Exits 1 when a metric got significantly worse beyond the threshold (RPS down; latency, errors, lost or
    duplicated tasks up), naming the metrics, or when a case of a later result breaches a --fail-if
    objective, naming it, so it can gate CI (docs/ci-gate.md). Exits 2 on a usage error.
    """
    from taskbench.report.compare import compare as compare_results
    from taskbench.results import ResultFormatError, load

    objectives = parse_objectives(fail_if or [])
    gating = parse_metrics(metrics)
    if format not in ("table", "html", "json"):
        fail(f"--format must be table, html or json, not {format!r}")
    if len(results) < 2 and not (results and objectives):
        fail("give at least two result files, the baseline first (or one with --fail-if)")
    if len(results) < 2 and (format == "html" or gating is not None):
        fail(f"{'--format html' if format == 'html' else '--metrics'} compares: give the baseline's result too")
    limit = threshold / 100
    try:
        loaded = [load(path) for path in results]
    except ResultFormatError as exc:
        fail(str(exc))
    labels = _labels(results)
    comparisons = [compare_results(loaded[0], other, threshold=limit, alpha=alpha, label_a=labels[0],
                                   label_b=label, gating=gating)
                   for other, label in zip(loaded[1:], labels[1:], strict=True)]
    if comparisons and not any(cmp.cases for cmp in comparisons):
        fail("no case of the results has the same parameters: nothing to compare")
    _verdict(loaded, labels, comparisons, objectives, format=format, output=out_file, threshold=limit, alpha=alpha)


def _verdict(loaded: list[Result], labels: list[str], comparisons: list[Comparison], objectives: list[Objective],
             *, format: str, output: Path | None, threshold: float, alpha: float) -> None:
    """Show the comparison, check the objectives against every later result (the only one, alone), exit."""
    import json

    from taskbench.report.compare_view import render, render_html, verdict_json
    from taskbench.report.objectives import check, describe

    checked = list(zip(labels, loaded, strict=True))[1 if len(loaded) > 1 else 0:]
    checks = check(objectives, checked)
    regressions = [(f"{cmp.label_b}: " if len(comparisons) > 1 else "") + name
                   for cmp in comparisons for name in cmp.regressions]
    status = 1 if regressions or not all(c.passed for c in checks) else 0
    out = console()
    if format == "html":
        target = output or Path("compare.html")
        write_or_fail(target, render_html(loaded, labels, comparisons, threshold=threshold, alpha=alpha))
        out.print(str(target), markup=False)
    elif format == "json":
        typer.echo(json_text(json.dumps(verdict_json(comparisons, checks, status), indent=2)))
    else:
        for cmp in comparisons:
            render(cmp, out, threshold=threshold, alpha=alpha)
    for c in checks:
        typer.secho(printable(describe(c)), err=True, fg=None if c.passed else typer.colors.RED)
    if regressions:
        typer.secho(printable("regressed: " + "; ".join(regressions)), err=True, fg=typer.colors.RED)
    elif comparisons:
        typer.echo("no metric got significantly worse", err=True)
    if status:
        raise typer.Exit(status)


def _labels(paths: list[Path]) -> list[str]:
    """Short names: the run folder's name (result.json's parent), unique."""
    names = [p.parent.name if p.name == "result.json" and p.parent.name else p.stem for p in paths]
    if len(set(names)) < len(names):
        names = [f"{chr(ord('A') + i)} {n}" if i < 26 else f"{i} {n}" for i, n in enumerate(names)]
    return names
