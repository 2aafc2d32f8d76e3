"""A scenario's table: our figures, and the article's beside them where the article has them."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from taskbench.report import matrix
from taskbench.report.fit import print_table
from taskbench.report.formats import RATE
from taskbench.report.formats import fmt as _fmt
from taskbench.results import CaseBase, Result, Summary

# (summary key, header, format, article figure key or None)
Column = tuple[str, str, str, str | None]
COLUMNS: dict[str, list[Column]] = {
    "queue": [
        ("rps", "RPS", RATE, "rps"), ("p50_ms", "median\nms", "{:.0f}", "p50_ms"),
        ("p95_ms", "p95\nms", "{:.0f}", "p95_ms"),
        ("time_to_run_all_s", "all tasks\nrun in s", "{:.1f}", "time_to_run_all_s"),
        ("errors_pct", "errors\n%", "{:.1f}", "errors_pct"), ("accepted", "accepted", "{}", None),
        ("lost", "lost", "{}", None), ("duplicated", "dup", "{}", None), ("unexpected", "unexp", "{}", None),
        ("e2e_p95_ms", "e2e p95\nms", "{:.0f}", None),
    ],
    "http": [
        ("rps", "RPS", RATE, "rps"), ("peak_rps", "peak\nRPS", RATE, "peak_rps"),
        ("p50_ms", "median\nms", "{:.0f}", "p50_ms"),
        ("p95_ms", "p95\nms", "{:.0f}", "p95_ms"), ("errors_pct", "errors\n%", "{:.1f}", "errors_pct"),
        ("concurrency", "in flight\n(peak)", "{:.0f}", "concurrency"),
        ("threads_seen", "threads\nused", "{}", None), ("connections_peak", "connections\n(peak)", "{}", None),
        ("max_users", "users", "{}", None),
        ("server_cpu_s", "server\nCPU s", "{:.1f}", None),
    ],
    "celery": [
        ("tasks", "tasks", "{}", None), ("elapsed_s", "time s", "{:.2f}", "elapsed_s"),
        ("tasks_per_s", "tasks/s", "{:.1f}", "tasks_per_s"), ("cpu_s", "worker\nCPU s", "{:.1f}", None),
        ("max_parallel", "ran at\nonce", "{}", None), ("lost", "lost", "{}", None),
        ("duplicated", "dup", "{}", None),
    ],
}


# shown when a case of the scenario injected a fault: how long the run took to recover
FAULT_COLUMNS: list[Column] = [
    ("restart_ready_s", "restarted,\nready in s", "{:.1f}", None),
    ("accepting_again_s", "accepting\nagain in s", "{:.1f}", None),
    ("first_execution_s", "first run\nafter s", "{:.1f}", None),
    ("executing_again_s", "executing\nagain in s", "{:.1f}", None),
    ("executing_90_s", "90 %\nagain in s", "{:.1f}", None),
    ("throughput_ratio", "after/\nbefore", "{:.2f}", None),
]


# shown when a case ran tasks more than once: the executions beyond each task's first (an unsafe
# broadcast wiring runs every task once per worker)
EXTRA_COLUMN: Column = ("extra_executions", "extra\nruns", "{}", None)


# shown when a celery case's tasks raised (seed 000's ProcessPoolExecutor inside a prefork task)
RAISED_COLUMN: Column = ("failed", "tasks\nraised", "{}", None)


# the name of the figure a repeated case is ranked by, in a header
RANKED_HEADER = {"queue": "RPS", "http": "RPS", "celery": "tasks/s"}
for _column in [*(c for cols in COLUMNS.values() for c in cols), *FAULT_COLUMNS, EXTRA_COLUMN, RAISED_COLUMN]:
    assert _column[0] in Summary.model_fields, f"column {_column[0]!r} is not a Summary figure"


def columns(kind: str, cases: list[CaseBase]) -> list[Column]:
    faulted = any(c.summary.fault for c in cases)
    extra = [EXTRA_COLUMN] if any(c.summary.extra_executions for c in cases) else []
    if kind == "celery" and any(c.summary.failed for c in cases):
        extra.append(RAISED_COLUMN)
    return COLUMNS[kind] + extra + (FAULT_COLUMNS if faulted else [])


def spread(summary: Summary) -> str:
    """'3: 850–910' for a case run three times; '' for a single run."""
    if summary.spread is None:
        return ""
    return f"{summary.spread.runs}: {summary.spread.min:.0f}–{summary.spread.max:.0f}"


def limits_summary(case: CaseBase) -> str:
    """How the limits were applied, for the table: 'cgroup-v1', 'pinning', '–'."""
    records = case.limits
    trees = processes_summary(case)
    if not records:
        return trees or "–"
    methods = "/".join(sorted({str(r.method) for r in records.values()}))
    used = []
    for name, record in records.items():
        if record.load_cpu is not None:
            used.append(f"{name} {record.load_cpu:.2f}")
        elif record.stats.cpu_s is not None and record.stats.wall_s:
            used.append(f"{name} {record.stats.cpu_s / record.stats.wall_s:.2f}")
    label = "CPU used under load" if any(r.load_cpu is not None for r in records.values()) else "CPU used"
    return methods + (f"; {label}: {', '.join(used)}" if used else "") + (f"; {trees}" if trees else "")


def processes_summary(case: CaseBase) -> str:
    """'processes: server 3, worker 5' when a component ran more than one process during the load (its
    tree: a uvicorn parent and its workers, a Celery worker and its forks); '' when each ran one."""
    if not any(count > 1 for count in case.processes.values()):
        return ""
    return "processes: " + ", ".join(f"{name} {count}" for name, count in case.processes.items())


def _scenario(result: Result) -> tuple[str, str, str]:
    if result.scenario is None:
        raise ValueError(f"{result.run_id} is a run's result, not a scenario's")
    return result.scenario.kind, result.scenario.name, result.scenario.description


def render(result: Result, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 160)
    kind, name, description = _scenario(result)
    cases: list[CaseBase] = list(result.cases)
    with_article = {fig for c in cases for fig in (c.article or {})}
    # every string of a result file is text, not markup: a label "[/]" once crashed the run after it finished
    table = Table(title=escape(f"taskbench scenario {name} ({result.run_id}): {description}"),
                  title_justify="left")
    table.add_column("case", justify="left")
    shown = columns(kind, cases)
    for _key, header, _, fig in shown:
        table.add_column(header, justify="right")
        if fig and fig in with_article:
            table.add_column("article\n" + header.split("\n")[0], justify="right", style="dim")
    driven = kind != "celery"  # celery cases enqueue from a probe, not from the load driver
    repeated = any(c.summary.spread for c in cases)
    if repeated:
        table.add_column(f"runs:\n{RANKED_HEADER[kind]} range", justify="right")
    table.add_column("limits", justify="left")
    if driven:
        table.add_column("driver\nCPU %", justify="right")
    table.add_column("status", justify="left")
    if "note" in with_article:
        table.add_column("article says", justify="left", style="dim")
    for case in cases:
        s = case.summary
        article = case.article or {}
        row = [escape(case.name)]
        for key, _, fmt, fig in shown:
            value = s.figure(key)
            cell = _fmt(value, fmt)
            if key in ("lost", "duplicated") and value:
                cell = f"[bold red]{cell}[/]"
            row.append(cell)
            if fig and fig in with_article:
                row.append(_fmt(article.get(fig), fmt))
        if repeated:
            row.append(spread(s))
        row.append(escape(limits_summary(case)))
        if driven:
            row.append(_fmt(s.driver_cpu_pct, "{:.0f}") + (" SAT" if s.driver_saturated else ""))
        status = case.status
        row.append({"ok": "[green]ok[/]", "errors": "[yellow]errors[/]"}.get(status, "[bold red]failed[/]"))
        if "note" in with_article:
            row.append(escape(str(article.get("note", ""))))
        table.add_row(*row)
    print_table(console, table)
    grid = matrix.build(result)
    if len(grid.cells) > 1:
        print_table(console, matrix.rich_table(grid, title=escape(f"fault matrix of {name} (case numbers after #)")),
                    per_cell=True)
    art = result.scenario.article if result.scenario else {}
    if art.get("source"):
        console.print(f"[dim]article: {escape(str(art['source']))}[/]")
    if art.get("setup"):
        console.print(f"[dim]article's setup: {escape(str(art['setup']))}[/]")
    for note in notes(result):
        console.print(note)
    for line in series_lines(result):
        console.print(f"[dim]{escape(line)}[/]")
    console.print(f"[dim]{escape(machine_line(result))}[/]")


def series_lines(result: Result, points: int = 8) -> list[str]:
    """Under a ramp, RPS against users: where each case stopped keeping up (seed 001's charts)."""
    out = []
    for case in result.cases:
        series = [p.model_dump() for p in getattr(case, "series", [])]
        if case.params.get("model") != "ramp" or len(series) < 2:
            continue
        # seconds while users were still being added, then the plateau; drop the drain at the end
        peak_users = max(row["users"] for row in series)
        end = next((i for i, row in enumerate(series) if row["users"] == peak_users), len(series) - 1)
        rows = series[: min(len(series), end + 3)]
        step = max(1, len(rows) // points)
        picked = rows[::step][:points]
        if picked[-1] is not rows[-1]:
            picked.append(rows[-1])
        cells = ", ".join(f"{row['users']}→{row['rps']}" for row in picked)
        out.append(f"{case.name}, users→RPS along the ramp: {cells}")
    return out


def machine_line(result: Result) -> str:
    """Where the figures come from, with the one-core speed that makes two runs comparable."""
    m = result.machine
    cal = m.cpu_calibration
    speed = f"; one core runs {cal.task} in {cal.cpu_ms:.0f} ms" if cal and cal.cpu_ms else ""
    return (f"machine: {m.cpu_model or 'unknown CPU'}, {m.logical_cpus} CPUs, "
            f"{m.system}, Python {m.python or '?'}{speed}")


def notes(result: Result) -> list[str]:
    """What a reader must know to trust the table: saturation, limits not applied, failures (rich markup,
    every string of the result escaped)."""
    out: list[str] = []
    for case in result.cases:
        who = escape(case.name)
        if case.summary.driver_saturated:
            load = getattr(case, "load", None)
            reason = (load.saturation_reason if load else None) or "driver CPU ≥ 90 %"
            out.append(f"[yellow]{who}: the load driver was the bottleneck ({escape(reason)}); the RPS is a "
                       "lower bound of the server's[/]")
        for name, record in case.limits.items():
            if not record.applied:
                out.append(f"[yellow]{who}: {escape(name)}: limits not applied: "
                           + escape("; ".join(record.notes)) + "[/]")
        for failure in case.failures:
            out.append(f"[red]{who}: {escape(failure)}[/]")
        fault = getattr(case, "fault", None)
        for line in fault.within_bounds if fault is not None else []:  # a figure its promise allows
            out.append(f"[dim]{who}: {escape(line)}[/]")
    if result.scenario is not None and result.scenario.kind != "celery" \
            and not any("bottleneck" in n for n in out):
        out.append("[dim]the load driver was not the bottleneck in any case (every driver process "
                   "below 90 % of a core)[/]")
    return out


def markdown(result: Result) -> str:
    """The same table as GitHub markdown (for docs/results.md), article figures in parentheses."""
    kind, _, _ = _scenario(result)
    cases: list[CaseBase] = list(result.cases)
    with_article = {fig for c in cases for fig in (c.article or {})}
    repeated = any(c.summary.spread for c in cases)
    shown = columns(kind, cases)
    headers = ["case"] + [h.replace("\n", " ") for _, h, _, _ in shown]
    if repeated:
        headers.append(f"runs: {RANKED_HEADER[kind]} range")
    headers.append("limits")
    if kind != "celery":
        headers.append("driver CPU %")
    headers.append("status")
    if "note" in with_article:
        headers.append("article says")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for case in cases:
        s = case.summary
        article = case.article or {}
        row = [case.name]
        for key, _, fmt, fig in shown:
            cell = _fmt(s.figure(key), fmt)
            if fig and article.get(fig) is not None:
                cell += f" ({_fmt(article[fig], fmt)})"
            row.append(cell)
        if repeated:
            row.append(spread(s))
        row.append(limits_summary(case))
        if kind != "celery":
            row.append(_fmt(s.driver_cpu_pct, "{:.0f}") + (" SAT" if s.driver_saturated else ""))
        row.append(case.status)
        if "note" in with_article:
            row.append(str(article.get("note", "")))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    series = series_lines(result)
    extra = "".join(f"- {line}\n" for line in series) + ("\n" if series else "")
    grid = matrix.build(result)
    if len(grid.cells) > 1:
        extra += "Fault matrix:\n\n" + matrix.markdown(grid) + "\n"
    return "\n".join(lines) + "\n\n" + extra + machine_line(result) + "\n"
