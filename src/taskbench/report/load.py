"""A load over time, rendered: the phases of ``--phases`` (a row per backend and phase, the timeline with
its phases as bands) and the search of ``--find-max-rate`` (its outcome and steps), for the terminal and
the HTML page. From the result only."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from taskbench.report import plots
from taskbench.report.fit import print_table
from taskbench.report.page import cell, esc, figure, table
from taskbench.results import QueueCase, Result
from taskbench.results.load import PhaseRecord, RateSearch

#: a band's colour per phase kind
BAND_COLORS = {"warmup": "#7f7f7f", "steady": "#1f77b4", "burst": "#ff7f0e", "pause-workers": "#d62728",
               "stall-broker": "#9467bd", "recovery": "#2ca02c"}
#: (header, format) of a phase's row, after the backend and the phase
PHASE_COLUMNS = [("offered\nreq/s", "{:.0f}"), ("achieved\nreq/s", "{:.0f}"), ("executed\n/s", "{:.0f}"),
                 ("backlog\nat end", "{}"), ("backlog\ngrowth /s", "{:+.1f}"), ("e2e p50\nms", "{:.0f}"),
                 ("e2e p95\nms", "{:.0f}"), ("e2e p99\nms", "{:.0f}"), ("errors", "{}"),
                 ("back to the\nearlier backlog", "{}")]


def phase_cells(phase: PhaseRecord) -> list[float | int | str | None]:
    """The figures of a phase's row, in :data:`PHASE_COLUMNS` order."""
    recovery: str | None = None
    if phase.kind == "recovery":
        recovery = (f"after {phase.recovered_after_s:.0f} s" if phase.recovered_after_s is not None
                    else "not in the phase") + (f" (≤ {phase.reference_backlog})"
                                                if phase.reference_backlog is not None else "")
    e2e = phase.e2e_ms
    return [phase.offered_rps, phase.achieved_rps, phase.executed_per_s, phase.backlog_end, phase.backlog_slope,
            e2e.p50 if e2e.count else None, e2e.p95 if e2e.count else None, e2e.p99 if e2e.count else None,
            phase.errors, recovery]


def phase_name(phase: PhaseRecord) -> str:
    rate = f"@x{phase.multiple:g}" if phase.multiple is not None else ""
    return f"{phase.kind} {phase.start_s:g}-{phase.start_s + phase.duration_s:g} s{rate}"


def render_terminal(result: Result, console: Console) -> None:
    """The phases' table and each search's outcome and steps, after the run's table."""
    cases = [c for c in result.cases if isinstance(c, QueueCase)]
    phased = [c for c in cases if c.phases]
    if phased:
        out = Table(title="phases (the warm-up is in no figure)", title_justify="left")
        for head in ("backend", "phase", *(h for h, _ in PHASE_COLUMNS)):
            out.add_column(head, justify="left" if head in ("backend", "phase") else "right")
        for case in phased:
            for phase in (p for p in case.phases if p.measured):
                values = [v if v is None or isinstance(v, str) else fmt.format(v)
                          for v, (_, fmt) in zip(phase_cells(phase), PHASE_COLUMNS, strict=True)]
                out.add_row(escape(case.backend), escape(phase_name(phase)), *(escape(v or "–") for v in values))
        print_table(console, out)
        for case in phased:
            for phase in case.phases:
                for line in phase.proof + ([f"failed: {phase.error}"] if phase.error else []):
                    console.print(f"{escape(case.backend)}: {escape(phase.kind)}: {escape(line)}")
    for case in cases:
        if case.rate_search is not None:
            render_search(case.backend, case.rate_search, console)


def search_line(backend: str, search: RateSearch) -> str:
    """``arq: sustainable 430 req/s (confidence high): ...``."""
    rate = "no sustainable rate" if search.rate is None else f"sustainable {search.rate:.0f} req/s"
    return (f"{backend}: {rate} (confidence {search.confidence}; objective e2e p95 ≤ {search.max_e2e_p95_ms:g} ms, "
            f"backlog growth ≤ {search.max_growth_pct:g} % of the rate; {len(search.steps)} steps in "
            f"{search.elapsed_s:.0f} s): {search.note}")


def render_search(backend: str, search: RateSearch, console: Console) -> None:
    out = Table(title=f"{backend}: the search's steps ({search.step_s:g} s each, fitted after {search.settle_s:g} s)",
                title_justify="left")
    for head in ("step", "offered\nreq/s", "accepted\nreq/s", "executed\n/s", "backlog slope\ntasks/s",
                 "e2e p95\nms", "errors\n%", "drained\nafter s", "verdict"):
        out.add_column(head, justify="left" if head == "verdict" else "right")
    for n, step in enumerate(search.steps, start=1):
        out.add_row(str(n), f"{step.rate:.0f}", f"{step.accepted_rps:.0f}", f"{step.executed_per_s:.0f}",
                    f"{step.backlog_slope:+.1f} ± {step.slope_stderr:.1f}",
                    "–" if step.e2e_p95_ms is None else f"{step.e2e_p95_ms:.0f}", f"{step.errors_pct:.2f}",
                    "–" if step.drained_after_s is None else f"{step.drained_after_s:.1f}",
                    "[green]met[/]" if step.passed else f"[yellow]missed[/]: {escape('; '.join(step.reasons))}")
    print_table(console, out)
    console.print(escape(search_line(backend, search)))


# -- the page ----------------------------------------------------------------------------------------


def phases_html(result: Result) -> str:
    """The phases' table of the page ("" without phases)."""
    phased = [c for c in result.cases if isinstance(c, QueueCase) and c.phases]
    if not phased:
        return ""
    headers = [("backend", "l"), ("phase", "l")] + [(h.replace("\n", " "), "") for h, _ in PHASE_COLUMNS]
    rows = []
    for case in phased:
        for phase in (p for p in case.phases if p.measured):
            row = [f'<td class="l">{esc(case.backend)}</td>', f'<td class="l">{esc(phase_name(phase))}</td>']
            for value, (_, fmt) in zip(phase_cells(phase), PHASE_COLUMNS, strict=True):
                row.append(f'<td class="l">{esc(value)}</td>' if isinstance(value, str) else cell(value, fmt))
            rows.append(row)
    return "<h2>Phases</h2><p class=\"note\">the warm-up is in no figure; a request belongs to the phase of its " \
           "intended send, a task to the phase it was enqueued in</p>" + table(headers, rows)


def searches_html(result: Result) -> str:
    """Each search's outcome and steps ("" without a search)."""
    found = [c for c in result.cases if isinstance(c, QueueCase) and c.rate_search is not None]
    if not found:
        return ""
    parts = ["<h2>Highest sustainable rate</h2>"]
    for case in found:
        search = case.rate_search
        assert search is not None
        parts.append(f"<p>{esc(search_line(case.backend, search))}</p>")
        rows = []
        for n, step in enumerate(search.steps, start=1):
            verdict = "met" if step.passed else "missed: " + "; ".join(step.reasons)
            rows.append([cell(n, "{}"), cell(step.rate, "{:.0f}"), cell(step.accepted_rps, "{:.0f}"),
                         cell(step.executed_per_s, "{:.0f}"), cell(step.backlog_slope, "{:+.1f}"),
                         cell(step.slope_stderr, "{:.1f}"), cell(step.e2e_p95_ms, "{:.0f}"),
                         cell(step.errors_pct, "{:.2f}"), cell(step.drained_after_s, "{:.1f}"),
                         f'<td class="l {"good" if step.passed else "warn"}">{esc(verdict)}</td>'])
        parts.append(table([("step", ""), ("offered req/s", ""), ("accepted req/s", ""), ("executed /s", ""),
                            ("backlog slope tasks/s", ""), ("± stderr", ""), ("e2e p95 ms", ""), ("errors %", ""),
                            ("drained after s", ""), ("verdict", "l")], rows, sortable=False))
    return "\n".join(parts)


def phase_plot(case: QueueCase) -> list[str]:
    """Accepted and executed tasks per second and the backlog, the phases drawn as bands."""
    if not case.backlog or not case.phases:
        return []
    # the phases and a little after: a long drain would squeeze them (the next plot shows all of it)
    end = max(p.start_s + p.duration_s for p in case.phases)
    points = [p for p in case.backlog if p.t < end + max(10.0, end / 5)] or case.backlog
    xs = [p.t for p in points] + [points[-1].t + 1]
    lines = [plots.Line("accepted tasks/s", xs, [p.accepted for p in points] + [points[-1].accepted], style="--"),
             plots.Line("executed tasks/s", xs, [p.executed for p in points] + [points[-1].executed])]
    # the backlog is a level at each second's end: drawn at t + 1
    backlog = [plots.Line("backlog (tasks)", [0] + [p.t + 1 for p in points], [0] + [p.backlog for p in points],
                          color="#d62728")]
    bands = [plots.Band(p.start_s, p.start_s + p.duration_s, p.kind + ("" if p.measured else " (not measured)"),
                        color=BAND_COLORS.get(p.kind, "#1f77b4"), hatch=None if p.measured else "//")
             for p in case.phases]
    svg = plots.timeline("Phases: tasks per second and the backlog", lines, "per second", right=backlog,
                         right_label="backlog", bands=bands)
    return [figure(svg, "seconds since the load's first request, up to a little after the last phase (the next "
                        "plot shows the whole drain)")]
