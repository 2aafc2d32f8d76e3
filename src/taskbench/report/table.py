"""Terminal table of a run's result: the row of report/run_row.py, the bottleneck line and what a row cannot show."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from taskbench.report import run_row
from taskbench.report.fit import print_table
from taskbench.report.load import render_terminal as render_load
from taskbench.report.pace import bottleneck_line
from taskbench.report.run_row import Cell
from taskbench.report.soak import summary_lines
from taskbench.results import AuditResult, FaultRecord, QueueCase, Result

#: a tone of a cell's span (report/run_row.py) in rich's styles
STYLES = {"good": "green", "warn": "yellow", "bad": "bold red"}


def markup(cell: Cell) -> str:
    """A cell in rich's markup: its text escaped, each toned span styled."""
    return "".join(f"[{STYLES[tone]}]{escape(text)}[/]" if tone else escape(text) for text, tone in cell.spans)


def render(result: Result, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 140)  # piped output: keep one row per case
    # every string of a result file is text, not markup
    table = Table(title=escape(_title(result)), title_justify="left", show_edge=False)
    cases = [c for c in result.cases if isinstance(c, QueueCase)]
    shown = run_row.columns(cases)
    own = len(shown) > len(run_row.COLUMNS)  # a user's task: its failed calls, CPU per call, the workers' memory
    if own and not console.is_terminal:
        console.width = max(console.width, 175)
    for name, justify in shown:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for case in cases:
        table.add_row(*(markup(cell) for cell in run_row.row(case, own)))
    print_table(console, table)
    if result.interrupted:
        console.print(f"[bold red]{escape(result.interrupted)}[/]: the table holds what was measured until then")
    for line in filter(None, map(bottleneck_line, cases)):
        console.print(f"[yellow]{escape(line)}[/]")
    _footer(cases, console)
    _case_lines(cases, console)
    render_load(result, console)  # --phases: a row per phase; --find-max-rate: the rate and the steps


def _footer(cases: list[QueueCase], console: Console) -> None:
    """What the columns mean where a row cannot say it: a 202 that proves nothing, the ledger's cost."""
    for line in filter(None, map(run_row.not_kept, cases)):
        console.print(line, markup=False)
    if cases:  # a run's workers always record every execution: the audit needs it
        console.print(run_row.LEGEND, markup=False)


def _title(result: Result) -> str:
    """The table's title: the run, its workload and the load's shape and bound."""
    cfg = result.config or {}
    load = cfg.get("load", {})
    bound = " or ".join(
        b for b in (f"{load['requests']} requests" if load.get("requests") else "",
                    f"{load['duration']:g} s" if load.get("duration") else "") if b
    )
    if load.get("schedule"):  # --phases
        bound = f"{len(load['schedule'])} phases over {sum(s['duration'] for s in load['schedule']):g} s"
    if cfg.get("rate_search"):  # --find-max-rate: the row is the step at the rate found
        bound = "the search for the highest sustainable rate (the row: its step at the rate found)"
    model = "open" if cfg.get("rate_search") else load.get("model")  # the search's steps are open loads
    return f"taskbench {result.run_id}: {cfg.get('workload')}, {model} load, {load.get('users')} users, {bound}"


def _case_lines(cases: list[QueueCase], console: Console) -> None:
    """Under the table, per case: what its row cannot show (an unsafe wiring, the audit, a fault, a soak,
    failures, a saturated driver)."""
    for case in cases:
        who = escape(case.backend)
        if case.unsafe:
            extra = case.summary.extra_executions
            console.print(f"[yellow]{who} is an UNSAFE seed wiring ({escape(case.unsafe)}); measured: "
                          f"{extra if extra is not None else '?'} executions beyond each task's first[/]")
        if case.audit is not None and case.audit.categories.attempted:
            console.print(f"{who}: {categories_line(case.audit)}")
        if case.fault is not None:
            console.print(f"{who}: {escape(fault_line(case.fault))}")
            for line in case.fault.within_bounds:  # a figure its promise allows, with the bound
                console.print(f"[dim]{who}: {escape(line)}[/]")
        if case.soak is not None:
            for line in summary_lines(case.soak):
                console.print(f"{who}: {escape(line)}")
        for failure in case.failures:
            console.print(f"[red]{who}: {escape(failure)}[/]")
        if case.summary.driver_saturated:
            reason = (case.load.saturation_reason if case.load else None) or "driver CPU ≥ 90 %"
            console.print(f"[yellow]{who}: the load driver saturated ({escape(reason)}); "
                          "its RPS is a lower bound of the server's[/]")


def failed_types(types: dict[str, int]) -> str:
    """``tasks.FlakyError 11, TimeoutError 2``: the exception types of the failed tasks, most first."""
    return ", ".join(f"{kind} {count}" for kind, count in types.items())


def fault_line(fault: FaultRecord) -> str:
    """What an injected fault did and how long the run took to recover from it."""
    if not fault.injected:
        return f"fault {fault.fault}: not injected ({fault.note or fault.error})"

    def seconds(value: float | None) -> str:
        return "never" if value is None else f"{value:.2f} s"

    if fault.killed_pid is not None:
        times = f" {len(fault.kills)} times" if len(fault.kills) > 1 else ""
        parts = [f"fault {fault.fault}: {fault.target} (pid {fault.killed_pid}) killed{times}"]
        if fault.ready_after_s is not None:
            parts.append(f"restarted and ready after {fault.ready_after_s:.2f} s")
    else:
        lasted = f" for {fault.ended - fault.at:.2f} s" if fault.ended and fault.at else ""
        parts = [f"fault {fault.fault}: {fault.target} paused{lasted}"]
    if fault.error:
        parts.append(f"failed: {fault.error}")
    if fault.during_drain:  # no requests after it: only the executions tell the recovery
        parts.append(f"during the drain (the load had ended); executed at half the earlier rate again after "
                     f"{seconds(fault.executing_again_s)}")
    else:
        parts.append(f"tasks accepted at half the earlier rate again after {seconds(fault.accepting_again_s)}, "
                     f"executed after {seconds(fault.executing_again_s)}")
    if fault.first_execution_s is not None or fault.executing_90_s is not None:
        parts.append(f"first execution after {seconds(fault.first_execution_s)}, "
                     f"90 % of the rate after {seconds(fault.executing_90_s)}")
    if fault.throughput_ratio is not None:
        parts.append(f"throughput after recovery {fault.throughput_ratio:.2f} x the "
                     f"{fault.pre_fault_rate or 0:.0f}/s before")
    return "; ".join(parts)


def categories_line(audit: AuditResult) -> str:
    """Jepsen's queue categories of a case: counts and shares of the ids the driver sent."""
    c = audit.categories
    parts = [f"{name} {count} ({100 * frac:.2f} %)" for name, count, frac in (
        ("ok", c.ok, c.ok_frac), ("lost", c.lost, c.lost_frac),
        ("duplicated", c.duplicated, c.duplicated_frac), ("unexpected", c.unexpected, c.unexpected_frac))]
    if c.failed or audit.cpu_ms is not None:  # a user's task: its calls that raised, by exception type
        kinds = f": {escape(failed_types(audit.failed_types))}" if audit.failed_types else ""
        parts.append(f"failed {c.failed} ({100 * c.failed_frac:.2f} %{kinds})")
        parts.append(f"indeterminate {c.indeterminate} ({100 * c.indeterminate_frac:.2f} %)")
    line = f"of {c.attempted} sent: " + ", ".join(parts)
    if c.unexpected:
        line += f"; {c.recovered} of the unexpected after a non-2xx or no answer"
    if c.refused:
        line += f"; [yellow]{c.refused} refused with 409[/] (the id was already submitted: sent twice?)"
    if audit.corrupt:
        line += f"; [bold red]{audit.corrupt} corrupt ledger rows[/]"
    return line
