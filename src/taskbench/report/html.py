"""``taskbench report --format html``: one self-contained page per result (a run or any scenario).

The cases compared on shared axes (tasks accepted and executed per second, the end-to-end p95), the
header (machine, commit, the parameters that differ from their defaults, library versions), the summary
table with the terminal's columns (sortable), then per case the curves, each quantity on one range for
every case: requests and tasks per second (the drain is a curve), latency by percentile, the end-to-end
distribution, the driver's CPU; scenarios add bars per case with the spread of repeated runs beside the
article's figure; fault runs mark the fault and the recoveries.
"""

from __future__ import annotations

from taskbench.histogram import Histogram
from taskbench.report import matrix, plots, run_row, soak
from taskbench.report.load import phase_plot, phases_html, searches_html
from taskbench.report.overview import Scales, comparison_html, scales
from taskbench.report.pace import bottleneck_line
from taskbench.report.page import cell, document, esc, facts, figure, table
from taskbench.report.parameters import setup
from taskbench.report.scenario import RANKED_HEADER, columns, limits_summary, machine_line
from taskbench.report.table import failed_types, fault_line
from taskbench.results import RANKED_BY, CaseBase, CeleryCase, FaultRecord, HttpCase, Load, QueueCase, Result

STATUS_CSS = {"ok": "good", "errors": "warn", "failed": "bad"}


def render(result: Result) -> str:
    if result.kind == "overhead":
        from taskbench.report.overhead import html

        return html(result)
    title = (f"taskbench scenario {result.scenario.name}" if result.scenario else "taskbench run") + \
        f" {result.run_id}"
    parts = [f"<h1>{esc(title)}</h1>"]
    grid = matrix.build(result)
    compared = comparison_html(result)
    if len(grid.cells) > 1:  # a fault scenario: the grid first (the comparison of its many cases after it)
        parts += [header(result), "<h2>Fault matrix</h2>", f"<div class=\"scroll\">{matrix.html_table(grid)}</div>",
                  compared]
    else:
        parts += [compared, header(result)]
    parts += ["<h2>Summary</h2>", summary_table(result)]
    parts += [found for found in (phases_html(result), searches_html(result)) if found]
    parts += notes(result)
    parts.append(setup(result))
    if result.scenario is not None:
        parts.append(scenario_bars(result))
    parts.append("<h2>Cases</h2>")
    shared = scales(result)
    parts += [case_section(result, case, shared) for case in result.cases]
    return document(title, "\n".join(parts))


# -- header and table --------------------------------------------------------------------------------


def header(result: Result) -> str:
    m, c = result.machine, result.commit
    commit = " ".join(x for x in (c.commit or "unknown", f"({c.branch})" if c.branch else "",
                                  "dirty" if c.dirty else "") if x)
    memory = f"{m.memory_bytes / 2**30:.1f} GiB" if m.memory_bytes else None
    items: list[tuple[str, object]] = [
        ("created", result.created), ("finished", result.finished), ("interrupted", result.interrupted),
        ("command", " ".join(result.command)), ("commit", commit),
        ("machine", machine_line(result).removeprefix("machine: ")), ("host", m.hostname), ("memory", memory),
        ("usable CPUs", m.usable_cpus),
    ]
    if result.scenario is not None:
        s = result.scenario
        items += [("scenario", f"{s.name}: {s.description}"), ("file", s.file), ("varying", s.varying),
                  ("article", s.article.get("source")), ("article's setup", s.article.get("setup"))]
    return facts(items)


def summary_table(result: Result) -> str:
    if result.scenario is None:
        return _run_table(result)
    kind = result.scenario.kind
    cases: list[CaseBase] = list(result.cases)
    with_article = {fig for c in cases for fig in (c.article or {})}
    shown = columns(kind, cases)
    headers = [("case", "l")]
    for _, head, _, fig in shown:
        headers.append((head.replace("\n", " "), ""))
        if fig and fig in with_article:
            headers.append(("article " + head.split("\n")[0], "article"))
    repeated = any(c.summary.spread for c in cases)
    if repeated:
        headers.append((f"runs: {RANKED_HEADER[kind]} range", ""))
    headers += [("limits", "l"), ("driver CPU %", ""), ("status", "l")]
    if "note" in with_article:
        headers.append(("article says", "l article"))
    rows = []
    for case in cases:
        s, article = case.summary, case.article or {}
        row = [f'<td class="l name">{esc(case.name)}</td>']
        for key, _, spec, fig in shown:
            value = s.figure(key)
            row.append(cell(value, spec, css="bad" if key in ("lost", "duplicated") and value else ""))
            if fig and fig in with_article:
                row.append(cell(article.get(fig), spec, css="article"))
        if repeated:
            sp = s.spread
            row.append(cell(sp.runs if sp else None, "{}") if not sp else
                       f'<td data-v="{sp.max - sp.min}">{sp.runs}: {sp.min:.0f}–{sp.max:.0f}</td>')
        row.append(f'<td class="l wide">{esc(limits_summary(case))}</td>')
        row.append(cell(s.driver_cpu_pct, "{:.0f}"))
        row.append(f'<td class="l {STATUS_CSS.get(case.status, "")}">{esc(case.status)}</td>')
        if "note" in with_article:
            row.append(f'<td class="l article wide">{esc(article.get("note", ""))}</td>')
        rows.append(row)
    return table(headers, rows)


def _run_table(result: Result) -> str:
    """The terminal's table (report/run_row.py), its bottleneck lines and what its columns mean."""
    queue = [c for c in result.cases if isinstance(c, QueueCase)]
    shown = run_row.columns(queue)
    own_task = len(shown) > len(run_row.COLUMNS)
    headers = [(head.replace("\n/", "/").replace("/\n", "/").replace("\n", " "), "l" if justify == "left" else "")
               for head, justify in shown]
    if own_task:  # a user's task: its failed calls by exception type, before the status
        headers.insert(-1, ("failed by exception type", "l"))
    rows = []
    for case in queue:
        row = [_td(cell, justify) for cell, (_, justify) in zip(run_row.row(case, own_task), shown, strict=True)]
        if own_task:
            row.insert(-1, f'<td class="l wide">{esc(failed_types(case.summary.failed_types or {}))}</td>')
        rows.append(row)
    lines = [f'<p class="warn">{esc(line)}</p>' for line in filter(None, map(bottleneck_line, queue))]
    if queue:
        lines.append(f'<p class="note">{esc(run_row.LEGEND)}</p>')
    return table(headers, rows) + "".join(lines)


def _td(cell: run_row.Cell, justify: str) -> str:
    """A cell of the run's table: its toned spans coloured, sorted by its number."""
    text = "".join(f'<span class="{tone}">{esc(t)}</span>' if tone else esc(t) for t, tone in cell.spans)
    klass = ' class="l nowrap"' if justify == "left" else ""
    return f'<td{klass} data-v="{esc("" if cell.sort is None else cell.sort)}">{text}</td>'


def notes(result: Result) -> list[str]:
    out = []
    for case in result.cases:
        for failure in case.failures:
            out.append(f'<p class="bad">{esc(case.name)}: {esc(failure)}</p>')
        if case.summary.driver_saturated:
            out.append(f'<p class="warn">{esc(case.name)} (SAT): the load driver saturated; its RPS is a lower '
                       "bound of the server's</p>")
        kept = run_row.not_kept(case) if isinstance(case, QueueCase) else None
        if kept:
            out.append(f'<p class="note">{esc(kept)}</p>')
    return out


# -- scenario bars -----------------------------------------------------------------------------------


def scenario_bars(result: Result) -> str:
    assert result.scenario is not None
    kind = result.scenario.kind
    figure_name = RANKED_BY[kind]
    unit = RANKED_HEADER[kind]
    items = []
    for case in result.cases:
        s, article = case.summary, case.article or {}
        art = article.get(figure_name)
        items.append(plots.Bar(label=case.name, value=s.figure(figure_name),
                               low=s.spread.min if s.spread else None, high=s.spread.max if s.spread else None,
                               article=float(art) if isinstance(art, int | float) else None))
    notes = (["error bars: lowest and highest of the repeated runs"] if any(i.low is not None for i in items) else []) \
        + (["hatched: the article's figure"] if any(i.article is not None for i in items) else [])
    svgs = [figure(plots.bars(f"{unit} per case", items, unit), "; ".join(notes))]
    if kind != "celery" and any(c.summary.p95_ms is not None for c in result.cases):
        p95 = []
        for case in result.cases:
            art = (case.article or {}).get("p95_ms")
            p95.append(plots.Bar(label=case.name, value=case.summary.p95_ms,
                                 article=float(art) if isinstance(art, int | float) else None))
        svgs.append(figure(plots.bars("p95 latency per case", p95, "ms")))
    return "<h2>Per case</h2><div class=\"plots\">" + "".join(svgs) + "</div>"


# -- one case ----------------------------------------------------------------------------------------


def case_section(result: Result, case: CaseBase, shared: Scales | None = None) -> str:
    parts = [f"<section class=\"case\"><h3>{esc(case.name)} "
             f"<span class=\"{STATUS_CSS.get(case.status, '')}\">({esc(case.status)})</span></h3>"]
    if case.params:
        parts.append(facts(list(case.params.items())))
    svgs: list[str] = []
    if isinstance(case, QueueCase):
        if case.fault is not None:
            parts.append(f"<p>{esc(fault_line(case.fault))}</p>")
            parts += [f"<p class=\"note\">{esc(line)}</p>" for line in case.fault.within_bounds]
        svgs += phase_plot(case)  # --phases: the timeline with the phases as bands
        svgs += queue_plots(case, shared or Scales())
        if case.soak is not None:
            parts.append("<ul class=\"soak\">" + "".join(f"<li>{esc(line)}</li>"
                                                         for line in soak.summary_lines(case.soak)) + "</ul>")
            svgs += soak.soak_plots(case.soak)
    elif isinstance(case, HttpCase):
        svgs += load_plots(case.load, shared or Scales(), users=True)
    elif isinstance(case, CeleryCase):
        parts.append(facts([*case.probe.items(), ("workers", [" ".join(a) for a in case.worker_argv])]))
    if svgs:
        parts.append("<div class=\"plots\">" + "".join(svgs) + "</div>")
    elif not isinstance(case, CeleryCase):
        parts.append("<p class=\"note\">no load was recorded for this case</p>")
    parts.append("</section>")
    return "\n".join(parts)


def queue_plots(case: QueueCase, shared: Scales) -> list[str]:
    load, audit = case.load, case.audit
    if load is None:
        return []
    fault = case.fault
    fault_seconds = fault.timeline if fault is not None else []
    # a fault case's timeline counts from the load's start; the driver's rows from its first request
    shift = round(fault.first_send - fault.load_start) if (
        fault is not None and fault_seconds and fault.first_send and fault.load_start) else 0
    xs = [row.t + shift for row in load.per_second]
    lines = [plots.Line("requests/s", xs, [row.completed for row in load.per_second]),
             plots.Line("accepted tasks/s", xs, [row.ok for row in load.per_second], style="--")]
    caption = ""
    if fault_seconds:  # a fault case: the timeline its record keeps (driver's 2xx, ledger's finishes)
        ts = [row.t for row in fault_seconds]
        lines[1] = plots.Line("accepted tasks/s", ts, [row.accepted for row in fault_seconds], style="--")
        lines.append(plots.Line("executed tasks/s", ts, [row.executed for row in fault_seconds]))
    elif audit is not None and audit.executed_per_second:
        ex = audit.executed_per_second
        lines.append(plots.Line("executed tasks/s", list(range(len(ex))), ex))
    elif audit is not None:
        caption = "executed tasks per second: not recorded by the taskbench that wrote this result"
    if any(row.errors for row in load.per_second):
        lines.append(plots.Line("failed requests/s", xs, [row.errors for row in load.per_second],
                                color="#d62728"))
    # a fault case's timeline and marks count from the driver's start (the record's load_start)
    origin = case.fault.load_start if case.fault is not None and case.fault.load_start else None
    marks = fault_marks(case.fault, origin or (audit.start if audit else None))
    out = [figure(plots.timeline("Requests and tasks per second", _extend(lines), "per second", marks=marks,
                                 ymax=shared.rate), caption)]
    out += load_plots(load, shared, timeline=False)
    if audit is not None and audit.end_to_end_histogram.count:
        hist = Histogram.from_dict(audit.end_to_end_histogram.model_dump())
        out.insert(2, figure(plots.distribution("End-to-end task latency (enqueue → finished)",
                                                [("tasks", hist)], span=shared.e2e_span_us,
                                                ymax=shared.e2e_count),
                             f"p50 {audit.end_to_end_ms.p50:.0f} ms, p95 {audit.end_to_end_ms.p95:.0f} ms, "
                             f"max {audit.end_to_end_ms.max:.0f} ms; {audit.executed} executed, "
                             f"{audit.lost} lost, {audit.duplicated} duplicated"
                             + (f", {audit.failed} failed ({failed_types(audit.failed_types)})"
                                if audit.failed else "")
                             + (f", {audit.indeterminate} started and never finished"
                                if audit.indeterminate else "")))
    return out


def load_plots(load: Load | None, shared: Scales, *, users: bool = False, timeline: bool = True) -> list[str]:
    """The driver's side: requests per second (HTTP cases), latency by percentile, driver CPU."""
    if load is None:
        return []
    out = []
    if timeline:
        xs = [row.t for row in load.per_second]
        lines = [plots.Line("responses/s", xs, [row.completed for row in load.per_second]),
                 plots.Line("2xx/s", xs, [row.ok for row in load.per_second], style="--")]
        if any(row.errors for row in load.per_second):
            lines.append(plots.Line("failed/s", xs, [row.errors for row in load.per_second], color="#d62728"))
        right = [plots.Line("users", xs, [row.users for row in load.per_second])] if users else None
        out.append(figure(plots.timeline("Requests per second", _extend(lines), "per second",
                                         right=_extend(right) if right else None, right_label="users",
                                         ymax=shared.rate)))
    if load.latency.count:
        hist = Histogram.from_dict(load.latency.model_dump())
        ms = load.latency_ms
        out.append(figure(plots.percentiles("Request latency by percentile", [("requests", hist)],
                                            ymax=shared.latency_ms),
                          f"p50 {ms.p50:.1f} ms, p99 {ms.p99:.1f} ms, max {ms.max:.1f} ms over "
                          f"{load.latency.count} requests"))
    if load.cpu:
        out.append(figure(plots.cpu("Load driver CPU", [c.utilization for c in load.cpu]),
                          "past 90 % of a core the driver, not the server, limits the figures"))
    return out


def _extend(lines: list[plots.Line]) -> list[plots.Line]:
    """Steps drawn 'post' need the end of the last second too."""
    out = []
    for line in lines:
        if line.x:
            out.append(plots.Line(line.label, [*line.x, line.x[-1] + 1], [*line.y, line.y[-1]], line.style,
                                  line.color))
        else:
            out.append(line)
    return out


def fault_marks(fault: FaultRecord | None, load_start: float | None) -> list[plots.Mark]:
    """The fault and its recoveries, in seconds since the load started."""
    if fault is None or not fault.injected:
        return []
    if fault.at is not None and load_start is not None:
        at = fault.at - load_start
    else:  # older results: the planned offset, 'kill-worker@2'
        try:
            at = float(fault.fault.partition("@")[2])
        except ValueError:
            return []
    verb = "killed" if fault.killed_pid is not None else "paused"
    marks = [plots.Mark(at, f"{fault.fault}: {fault.target} {verb}")]
    if fault.at is not None and load_start is not None:
        marks += [plots.Mark(t - load_start, f"killed again (+{t - fault.at:.1f} s)", color="#d62728", style=":")
                  for t in fault.kills[1:]]
        if fault.ended is not None:
            marks.append(plots.Mark(fault.ended - load_start, f"{fault.target} back (+{fault.ended - fault.at:.1f} s)",
                                    color="#d62728", style="--"))
    for value, label, color in ((fault.ready_after_s, "restarted, ready", "#9467bd"),
                                (fault.accepting_again_s, "accepting again", "#ff7f0e"),
                                (fault.executing_again_s, "executing again", "#2ca02c"),
                                (fault.executing_90_s, "90 % again", "#17becf")):
        if value is not None:
            marks.append(plots.Mark(at + value, f"{label} (+{value:.1f} s)", color=color, style=":"))
    return marks
