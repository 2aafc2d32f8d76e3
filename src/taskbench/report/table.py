"""Terminal table of a run's result, with the seed's columns plus the audit's."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from taskbench.report.fit import print_table
from taskbench.report.load import render_terminal as render_load
from taskbench.report.pace import bottleneck_line, mode_words, pace, seconds
from taskbench.report.soak import summary_lines
from taskbench.results import AuditResult, FaultRecord, QueueCase, Result


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "–" if value is None else fmt.format(value)


def _bad(count: int | None) -> str:
    return f"[bold red]{count}[/]" if count else str(count if count is not None else "–")


def render(result: Result, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 140)  # piped output: keep one row per case
    # every string of a result file is text, not markup
    table = Table(title=escape(_title(result)), title_justify="left", show_edge=False)
    # what decides first (the API's rate against the workers', the backlog, the task's wait), then the
    # HTTP side and the audit
    columns = [
        ("backend", "left"), ("enqueued", "left"), ("accepted\n/s", "right"), ("executed\n/s", "right"),
        ("backlog\nat end", "right"), ("drain\ns", "right"), ("e2e\np95", "right"),
        ("HTTP ms\np50/95/99", "right"), ("err\n%", "right"), ("lost/\ndup/\nunexp", "right"),
        ("status", "left"),
    ]
    cases = [c for c in result.cases if isinstance(c, QueueCase)]
    # a user's task (--workload module:callable): its failed calls, CPU per call and the workers' memory
    own = any(c.summary.failed is not None for c in cases)
    if own:
        columns[-1:-1] = [("failed", "right"), ("CPU ms\np50/p95", "right"), ("RSS MB\nstart/end", "right")]
        if not console.is_terminal:
            console.width = max(console.width, 175)
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for case in cases:
        s, p = case.summary, pace(case)
        status = {"ok": "[green]ok[/]", "errors": "[yellow]errors[/]"}.get(case.status, "[bold red]failed[/]")
        status += " [yellow]SAT[/]" if s.driver_saturated else ""  # the driver's CPU: said under the table
        cells = [
            escape(case.backend) + (" [UNSAFE]" if case.unsafe else ""), mode_words(case),
            _num(p.accepted_per_s, "{:,.0f}"), _num(p.executed_per_s, "{:,.0f}"), _num(p.backlog_end, "{:,}"),
            _num(p.drain_s, "{:.1f}"), seconds(p.e2e_p95_ms),
            "/".join(_num(v) for v in (s.p50_ms, s.p95_ms, s.p99_ms)), _num(s.errors_pct, "{:.2f}"),
            f"{_bad(s.lost)}/{_bad(s.duplicated)}/{_num(s.unexpected, '{}')}", status,
        ]
        if own:
            cells[-1:-1] = own_task_cells(case)
        table.add_row(*cells)
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
    for case in cases:
        if not case.durable:
            why = case.durability or ("no durable queue" if not case.has_worker else  # older files lack it
                                      "after-response enqueue: the 2xx is sent before the broker has the task")
            console.print(f"{case.name}: its 202 does not prove the task is kept ({why})", markup=False)
    if cases:  # a run's workers always record every execution: the audit needs it
        console.print("accepted/s: 2xx per second of the load; executed/s: first start to last finish; drain: the "
                      "load's end to the last finish; e2e: enqueue to finish. Each task also wrote its ledger "
                      "record (`taskbench drain --workload noop --ledger both` measures that cost)", markup=False)


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


def own_task_cells(case: QueueCase) -> list[str]:
    """failed, CPU per call (p50/p95 ms), memory (start/end MB) of a user's task's case."""
    s = case.summary
    failed = "–" if s.failed is None else f"[yellow]{s.failed}[/]" if s.failed else "0"
    cpu = "–" if s.cpu_p50_ms is None else f"{s.cpu_p50_ms:.2f}/{s.cpu_p95_ms or 0:.2f}"
    rss = "–" if s.rss_start_mb is None else f"{s.rss_start_mb:.0f}/{s.rss_end_mb or 0:.0f}"
    return [failed, cpu, rss]


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
    line = f"of {c.attempted} sent: " + ", ".join(parts)
    if c.unexpected:
        line += f"; {c.recovered} of the unexpected after a non-2xx or no answer"
    if c.refused:
        line += f"; [yellow]{c.refused} refused with 409[/] (the id was already submitted: sent twice?)"
    if audit.corrupt:
        line += f"; [bold red]{audit.corrupt} corrupt ledger rows[/]"
    return line
