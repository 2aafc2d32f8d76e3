"""How a comparison is shown: a terminal table per matched case, or one HTML page with the runs on shared axes."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from taskbench.histogram import Histogram
from taskbench.report.compare import Comparison, Metric
from taskbench.report.objectives import ObjectiveCheck
from taskbench.report.page import document, esc, facts, figure, table
from taskbench.results import HttpCase, QueueCase, Result

VERDICT_STYLE = {"worse": "bold red", "better": "green", "same": "dim", "noise": "dim", "untested": "dim"}
VERDICT_TEXT = {"worse": "WORSE", "better": "better", "same": "same", "noise": "within noise",
                "untested": "not tested"}
VERDICT_CSS = {"worse": "bad", "better": "good"}
NOT_GATED = "worse, not gated"  # a worse metric left out of --metrics: shown, no regression


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit in ("tasks",):
        return f"{value:.0f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def _change(metric: Metric) -> str:
    change = metric.change
    if change is None:
        if metric.a is not None and metric.b is not None and metric.b != metric.a:
            return f"{metric.b - metric.a:+g}"
        return "–" if metric.a is None or metric.b is None else "0 %"
    return f"{100 * change:+.1f} %"


def _p(metric: Metric) -> str:
    if metric.test is None:
        return "no samples"
    if not metric.test.decided:
        return f"too few ({metric.test.n_a}/{metric.test.n_b})"
    return f"{metric.test.p:.3g}"


def _verdict(cmp: Comparison, metric: Metric) -> tuple[str, str]:
    """The verdict's text and its style in the table."""
    if metric.verdict == "worse" and not cmp.gates(metric):
        return NOT_GATED, "yellow"
    return VERDICT_TEXT[metric.verdict], VERDICT_STYLE[metric.verdict]


def render(cmp: Comparison, console: Console, *, threshold: float, alpha: float) -> None:
    if not console.is_terminal:
        console.width = max(console.width, 120)
    # labels are folder names, cases and parameters come from the files: text, never markup
    label_a, label_b = escape(cmp.label_a), escape(cmp.label_b)
    console.print(f"[bold]{label_b}[/] against [bold]{label_a}[/] "
                  f"(worse: beyond {100 * threshold:g} % and Mann–Whitney p < {alpha:g})")
    if cmp.gating is not None:
        console.print(f"[dim]a regression only in: {escape(', '.join(sorted(cmp.gating)) or 'no metric')}[/]")
    for name, va, vb in cmp.differing:
        console.print(f"[dim]{escape(f'parameter {name}: {va!r} → {vb!r}')}[/]")
    for case in cmp.cases:
        t = Table(title=escape(case.name), title_justify="left")
        for header, justify in (("metric", "left"), (label_a, "right"), (label_b, "right"),
                                ("change", "right"), ("p", "right"), ("verdict", "left")):
            t.add_column(header, justify=justify)  # type: ignore[arg-type]
        for m in case.metrics:
            text, style = _verdict(cmp, m)
            t.add_row(f"{m.name} ({m.unit})", _value(m.a, m.unit), _value(m.b, m.unit), _change(m), _p(m),
                      f"[{style}]{text}[/]")
        console.print(t)
    for name in cmp.only_a:
        console.print(f"[yellow]only in {label_a}: {escape(name)}[/]")
    for name in cmp.only_b:
        console.print(f"[yellow]only in {label_b}: {escape(name)}[/]")
    if not cmp.cases:
        console.print("[yellow]no case of the two results has the same parameters[/]")


def render_html(results: list[Result], labels: list[str], comparisons: list[Comparison], *,
                threshold: float, alpha: float) -> str:
    title = "taskbench compare: " + " vs ".join(labels)
    parts = [f"<h1>{esc(title)}</h1>",
             f"<p class=\"note\">each later run against {esc(labels[0])}; a metric is worse when it moved the "
             f"wrong way by more than {100 * threshold:g} % and Mann–Whitney U on its samples gives p &lt; "
             f"{alpha:g}. Lost and duplicated tasks: any increase.</p>"]
    parts.append(facts([(label, f"{r.run_id}, {r.created}, commit {(r.commit.commit or '?')[:10]}, "
                                f"{' '.join(r.command[1:])}") for label, r in zip(labels, results, strict=True)]))
    for cmp in comparisons:
        parts.append(f"<h2>{esc(cmp.label_b)} against {esc(cmp.label_a)}</h2>")
        if cmp.differing:
            parts.append("<p>parameters that differ: " + esc("; ".join(
                f"{n}: {va!r} → {vb!r}" for n, va, vb in cmp.differing)) + "</p>")
        regressions = cmp.regressions
        parts.append(f"<p class=\"{'bad' if regressions else 'good'}\">" +
                     esc("worse: " + ", ".join(regressions) if regressions else "no metric got worse") + "</p>")
        for case in cmp.cases:
            rows = [[f'<td class="l">{esc(m.name)} ({esc(m.unit)})</td>', f"<td>{esc(_value(m.a, m.unit))}</td>",
                     f"<td>{esc(_value(m.b, m.unit))}</td>",
                     f'<td data-v="{m.change if m.change is not None else ""}">{esc(_change(m))}</td>',
                     f"<td>{esc(_p(m))}</td>",
                     f'<td class="l {VERDICT_CSS.get(m.verdict, "note")}">{esc(_verdict(cmp, m)[0])}</td>']
                    for m in case.metrics]
            parts.append(f"<h3>{esc(case.name)}</h3>" + table(
                [("metric", "l"), (cmp.label_a, ""), (cmp.label_b, ""), ("change", ""), ("p", ""),
                 ("verdict", "l")], rows))
    parts.append("<h2>The runs on the same axes</h2>")
    parts += overlay(results, labels, comparisons)
    return document(title, "\n".join(parts))


def overlay(results: list[Result], labels: list[str], comparisons: list[Comparison]) -> list[str]:
    """Per case of the first run matched in the others: RPS and executed tasks over time, latency percentiles."""
    from taskbench.report import plots  # matplotlib: only for the page, not the terminal table
    from taskbench.report.compare import case_key

    out = []
    for case in results[0].cases:
        key = case_key(case)
        found = [(label, c) for label, r in zip(labels, results, strict=True) for c in r.cases
                 if case_key(c) == key]
        if len(found) < 2:
            continue
        rate_lines, exec_lines, lat, e2e = [], [], [], []
        for i, (label, c) in enumerate(found):
            color = plots.COLORS[i % len(plots.COLORS)]  # one colour per run: solid requests, dashed tasks
            load = c.load if isinstance(c, QueueCase | HttpCase) else None
            if load is not None:
                xs = [row.t for row in load.per_second]
                rate_lines.append(plots.Line(f"{label} requests/s", xs, [row.completed for row in load.per_second],
                                             color=color))
                if load.latency.count:
                    lat.append((label, Histogram.from_dict(load.latency.model_dump())))
            if isinstance(c, QueueCase) and c.audit is not None:
                if c.audit.executed_per_second:
                    ex = c.audit.executed_per_second
                    exec_lines.append(plots.Line(f"{label} executed/s", list(range(len(ex))), ex, style="--",
                                                 color=color))
                if c.audit.end_to_end_histogram.count:
                    e2e.append((label, Histogram.from_dict(c.audit.end_to_end_histogram.model_dump())))
        svgs = []
        if rate_lines:
            svgs.append(figure(plots.timeline("Requests and executed tasks per second", rate_lines + exec_lines,
                                              "per second")))
        if lat:
            svgs.append(figure(plots.percentiles("Request latency by percentile", lat)))
        if e2e:
            svgs.append(figure(plots.distribution("End-to-end task latency", e2e)))
        if svgs:
            out.append(f"<section class=\"case\"><h3>{esc(case.name)}</h3><div class=\"plots\">"
                       + "".join(svgs) + "</div></section>")
    return out


def verdict_json(comparisons: list[Comparison], checks: list[ObjectiveCheck], status: int) -> dict[str, Any]:
    """``--format json``: the exit status, each objective with its cases' figures, the regressions and
    every compared metric, for a CI step to read instead of the table."""
    def metric(cmp: Comparison, case: str, m: Metric) -> dict[str, Any]:
        return {"result": cmp.label_b, "baseline": cmp.label_a, "case": case, "metric": m.key or m.name,
                "name": m.name, "unit": m.unit, "baseline_value": m.a, "value": m.b, "change": m.change,
                "p": m.test.p if m.test is not None and m.test.decided else None, "verdict": m.verdict,
                "gated": cmp.gates(m)}

    return {
        "status": status,
        "objectives": [{"objective": c.objective.text, "metric": c.objective.metric, "op": c.objective.op,
                        "value": c.objective.value, "unit": c.objective.unit, "passed": c.passed,
                        "cases": [{"result": k.result, "case": k.case, "value": k.value, "breached": k.breached}
                                  for k in c.cases]} for c in checks],
        "regressions": [metric(cmp, case.name, m) for cmp in comparisons for case in cmp.cases
                        for m in case.worse if cmp.gates(m)],
        "comparisons": [{"baseline": cmp.label_a, "result": cmp.label_b,
                         "gating": None if cmp.gating is None else sorted(cmp.gating),
                         "only_in_baseline": cmp.only_a, "only_in_result": cmp.only_b,
                         "metrics": [metric(cmp, case.name, m) for case in cmp.cases for m in case.metrics]}
                        for cmp in comparisons],
    }
