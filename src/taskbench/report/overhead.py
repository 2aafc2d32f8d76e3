"""Rendering of a ``taskbench overhead`` result: the terminal table, the JSON of ratios, the HTML page."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from taskbench.report.page import cell, document, esc, facts, flatten, table
from taskbench.results import OVERHEAD_SERVERS, OverheadCase, Result

HEADERS = {"ceiling": "ceiling\nreq/s", "floor": "library floor\nreq/s", "taskbench": "taskbench API\nreq/s"}
EXPLAIN = ("ceiling: FastAPI + one `await redis.incr`; library floor: a bare FastAPI endpoint enqueuing as the "
           "library's documentation shows; taskbench API: the reference API with its defaults.")
METHOD = {
    "together": ("In each round two servers at a time ran side by side on the API's cores and were loaded at "
                 "once until the first had had its requests: the floor and taskbench's API, then the ceiling and "
                 "the floor; a pair's two rates cover the same seconds (and share the cores: each is about half "
                 "of what it serves alone). req/s: the median of the rounds (the floor's beside taskbench); "
                 "ratio = taskbench ÷ floor, the median of the rounds' ratios (their range beside it); "
                 "floor ÷ ceiling from their pair; CPU: the server's CPU time per request, floor ÷ taskbench."),
    "sequential": ("The servers ran one after another, the order rotating each round; each figure is the "
                   "median of the rounds; ratio = taskbench ÷ floor of those medians; CPU: the server's CPU "
                   "time per request, floor ÷ taskbench."),
}


def method(result: Result) -> str:
    """How the servers were loaded; results written before ``together`` existed are ``sequential``."""
    return str((result.config or {}).get("method") or "sequential")


def explain(result: Result) -> str:
    """The caption: what the three servers are, and whether the ceiling and floor ran frozen too."""
    config = result.config or {}
    frozen = config.get("floor_gc_freeze")
    api_env = config.get("api_env") or {}
    runtime = ("The ceiling and the floor gc.freeze() once built, as the reference API does (--floor-gc-freeze)."
               if frozen else "The reference API gc.freeze()s its start-up heap (TASKBENCH_GC_FREEZE); the ceiling "
                              "and the floor do not (--floor-gc-freeze gives them the same).")
    settings = ", ".join(f"{k}={v}" for k, v in api_env.items())
    changed = f" Reference API settings changed: {settings}." if settings else ""
    return f"{EXPLAIN} {METHOD.get(method(result), '')} {runtime}{changed}"


def cases(result: Result) -> list[OverheadCase]:
    return [c for c in result.cases if isinstance(c, OverheadCase)]


def _spread(case: OverheadCase, server: str) -> str:
    values = sorted(r.load.rps for r in case.figures(server))
    return f"{values[0]:.0f}–{values[-1]:.0f}" if len(values) > 1 else ""


def _ratio_spread(case: OverheadCase) -> str:
    values = sorted(case.ratio_rounds)
    return f"{values[0]:.2f}–{values[-1]:.2f}" if len(values) > 1 else ""


def render(result: Result, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 160)  # piped output: one row per backend
    load = (result.config or {}).get("load", {})
    rounds = (result.config or {}).get("rounds")
    bound = " or ".join(x for x in (f"{load['requests']} requests" if load.get("requests") else "",
                                    f"{load['duration']:g} s" if load.get("duration") else "") if x)
    table_ = Table(title=escape(f"taskbench overhead {result.run_id}: io/simple, {load.get('users')} users, {bound} "
                                f"per server and round, {rounds} rounds, servers {method(result)}"),
                   title_justify="left")
    table_.add_column("backend", no_wrap=True)
    for server in OVERHEAD_SERVERS:
        table_.add_column(HEADERS[server], justify="right")
        table_.add_column("range", justify="right", style="dim")
    for name in ("ratio\ntaskbench÷floor", "rounds'\nratios", "floor÷\nceiling", "CPU µs/req\nfloor / ours",
                 "CPU ratio\nfloor÷ours", "taskbench\np95 ms", "status"):
        table_.add_column(name, justify="right" if name != "status" else "left")
    for case in cases(result):
        row = [escape(case.backend)]
        for server in OVERHEAD_SERVERS:
            value = case.rps.get(server)
            row += ["–" if value is None else f"{value:.0f}", _spread(case, server)]
        ratio = "–" if case.ratio is None else f"{case.ratio:.2f}"
        if case.ratio is not None and case.ratio < 0.9:
            ratio = f"[yellow]{ratio}[/]"
        cpu = case.cpu_us_per_request
        row += [ratio, _ratio_spread(case), "–" if case.floor_vs_ceiling is None else f"{case.floor_vs_ceiling:.2f}",
                f"{cpu.get('floor', 0):.0f} / {cpu.get('taskbench', 0):.0f}" if cpu else "–",
                "–" if case.cpu_ratio is None else f"{case.cpu_ratio:.2f}",
                "–" if case.summary.p95_ms is None else f"{case.summary.p95_ms:.1f}",
                "[green]ok[/]" if case.status == "ok" else "[bold red]failed[/]"]
        table_.add_row(*row)
    console.print(table_)
    console.print(explain(result), style="dim", markup=False)
    for case in cases(result):
        for failure in case.failures:
            console.print(f"[red]{escape(case.backend)}: {escape(failure)}[/]")
        if case.summary.driver_saturated:
            console.print(f"[yellow]{escape(case.backend)}: the load driver saturated in a round: that round's "
                          "req/s is a lower bound[/]")


def ratios(result: Result, path: str | None = None) -> dict[str, Any]:
    """``--format json``: per backend the three medians and ``ratio`` (taskbench ÷ floor)."""
    return {
        "run_id": result.run_id,
        "result": path,
        "method": method(result),
        "backends": {
            c.backend: {"ratio": c.ratio, "ratio_rounds": [round(x, 4) for x in c.ratio_rounds],
                        "cpu_ratio_rounds": [round(x, 4) for x in c.cpu_ratio_rounds],
                        "floor_vs_ceiling": c.floor_vs_ceiling, "rps": c.rps,
                        "cpu_ratio": c.cpu_ratio, "cpu_us_per_request": c.cpu_us_per_request,
                        "rounds": {s: [round(r.load.rps, 1) for r in c.figures(s)]
                                   for s in OVERHEAD_SERVERS},
                        "status": c.status, "failures": c.failures}
            for c in cases(result)
        },
    }


def html(result: Result) -> str:
    title = f"taskbench overhead {result.run_id}"
    headers = [("backend", "l")] + [(HEADERS[s].replace("\n", " "), "") for s in OVERHEAD_SERVERS] + [
        ("ratio taskbench÷floor", ""), ("rounds' ratios", ""), ("floor÷ceiling", ""), ("CPU ratio floor÷taskbench", ""),
        ("taskbench p95 ms", ""), ("status", "l")]
    rows = []
    for case in cases(result):
        row = [f'<td class="l">{esc(case.backend)}</td>']
        row += [cell(case.rps.get(s)) for s in OVERHEAD_SERVERS]
        row += [cell(case.ratio, "{:.2f}", css="warn" if case.ratio is not None and case.ratio < 0.9 else ""),
                f"<td>{esc(_ratio_spread(case))}</td>", cell(case.floor_vs_ceiling, "{:.2f}"),
                cell(case.cpu_ratio, "{:.2f}"),
                cell(case.summary.p95_ms, "{:.1f}"),
                f'<td class="l {"good" if case.status == "ok" else "bad"}">{esc(case.status)}</td>']
        rows.append(row)
    round_rows = []
    for case in cases(result):
        for r in case.rounds:
            lat = r.load.latency_ms
            round_rows.append([f'<td class="l">{esc(case.backend)}</td>', cell(r.round + 1, "{}"),
                               f'<td class="l">{esc(r.server)}</td>', f'<td class="l">{esc(r.beside or "–")}</td>',
                               cell(r.load.rps), cell(lat.p50, "{:.1f}"),
                               cell(lat.p95, "{:.1f}"), cell(sum(r.load.errors.values()), "{}"),
                               cell(100 * r.load.max_utilization), cell(r.cpu_us_per_request)])
    m = result.machine
    parts = [
        f"<h1>{esc(title)}</h1>",
        facts([("created", result.created), ("command", " ".join(result.command)),
               ("commit", result.commit.commit), ("CPU", m.cpu_model), ("usable CPUs", m.usable_cpus)]),
        "<h2>Summary</h2>", table(headers, rows), f'<p class="note">{esc(explain(result))}</p>',
        "<h2>Every round</h2>",
        table([("backend", "l"), ("round", ""), ("server", "l"), ("loaded beside", "l"), ("req/s", ""),
               ("median ms", ""), ("p95 ms", ""),
               ("errors", ""), ("driver CPU %", ""), ("server CPU µs/request", "")], round_rows),
        "<h2>Parameters</h2>", facts(flatten(result.config or {}), wide=True),
    ]
    return document(title, "\n".join(parts))
