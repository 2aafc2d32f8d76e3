"""Measurements beside the benchmark: ``ceiling`` (the bare FastAPI + Redis rate) and ``drain``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from taskbench import params
from taskbench.cli._common import (
    INTERRUPTED,
    backend_names,
    fail,
    interrupt_on_signals,
    os_error,
    show_progress,
    writable_folder,
)
from taskbench.units import Duration


def ceiling(
    users: Annotated[int, params.option("users")] = params.default("users"),
    requests: Annotated[int, params.option("requests")] = 20_000,
    driver_processes: Annotated[int, params.option("driver_processes")] = params.default("driver_processes"),
    redis_url: Annotated[str | None, params.option("redis_url")] = params.default("redis_url"),
    pin: Annotated[str, typer.Option(help="core placement, as for `run`")] = "auto",
    output: Annotated[Path, typer.Option(help="folder for logs")] = Path("results"),
) -> None:
    """Measure the ceiling: a bare FastAPI endpoint doing one `await redis.incr`, same load as `run`."""
    from taskbench.driver import LoadSpec
    from taskbench.harness import HarnessError
    from taskbench.harness.commands.ceiling import measure_ceiling
    from taskbench.harness.config import Placement, RunConfig

    writable_folder(output)
    interrupt_on_signals()
    try:
        config = RunConfig(load=LoadSpec(users=users, requests=requests, processes=driver_processes),
                           redis_url=redis_url, placement=Placement.parse(pin), output=output)
        data = measure_ceiling(config)
    except (ValueError, HarnessError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(os_error(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)
    lat = data.latency_ms
    typer.echo(f"ceiling (FastAPI + one await redis.incr): {data.rps:.0f} req/s, "
               f"median {lat.p50:.1f} ms, p95 {lat.p95:.1f} ms, errors {data.errors}, "
               f"driver CPU {100 * data.max_utilization:.0f} %")


def drain(
    backends: Annotated[str, typer.Option(help="comma-separated backends, or 'all'")] = "arq",
    tasks: Annotated[int, typer.Option(min=1, max=1_000_000, help="tasks per round")] = 5_000,
    round_seconds: Annotated[float, typer.Option(
        help="the longest a round drains: it ends when its tasks ran or then, its rate taken over what ran "
             "(a backend that runs a few tasks a second still gets a figure)", **Duration(5, 3_600).settings())
    ] = 60.0,
    concurrency: Annotated[int, params.option("concurrency", help="tasks at once in the worker")] = (
        params.default("concurrency")),
    ledger: Annotated[str, typer.Option(help="on | off | both (both measures the ledger's cost)")] = "both",
    workload: Annotated[str, typer.Option(
        help="io/simple (one INCRBY a task) | noop (nothing but the ledger's record)")] = "io/simple",
    repeat: Annotated[int | None, typer.Option(
        min=1, max=20,
        help="rounds per ledger mode (paired: rounds of both at once); medians (default: 5 with --ledger "
             "both, else 1)")] = None,
    method: Annotated[str | None, typer.Option(
        help="with --ledger both: paired (default: both modes at once, two workers side by side on the "
             "worker's cores; the ratio of each round is taken over the same seconds) or alternating "
             "(one worker at a time, the modes taking turns; a ratio of medians)")] = None,
    redis_url: Annotated[str | None, params.option("redis_url")] = params.default("redis_url"),
    pin: Annotated[str, typer.Option(
        help="core placement: auto (the worker alone on one core, Redis and the rest on the others), off, "
             "or roles as for `run` (workers, redis, driver)")] = "auto",
    format: Annotated[str, typer.Option("--format", help="table | json (per backend the ledger's ratio)")] = "table",
    output: Annotated[Path, typer.Option(help="folder for logs and drain.json")] = Path("results"),
) -> None:
    """A worker process's drain rate (tasks enqueued beforehand, no HTTP), with the ledger on and off: with
    --ledger both, two workers at once side by side, one per mode, each round's ratio over the same seconds."""
    from rich.console import Console
    from rich.markup import escape

    from taskbench import backends as registry
    from taskbench.harness import HarnessError
    from taskbench.harness.commands.drain import drain_placement, ledger_ratios, run_drain

    console = Console(stderr=True)
    show_progress(console)
    modes, repeat, paired = _drain_modes(ledger, repeat, method)
    if format not in ("table", "json"):
        fail(f"--format must be table or json, not {format!r}")
    if workload not in ("io/simple", "noop"):
        fail(f"--workload must be io/simple or noop, not {workload!r}")
    writable_folder(output)
    interrupt_on_signals()
    try:
        names = backend_names(backends)  # each on its default broker (a private PostgreSQL for those queues)
        for name in names:
            registry.info(name)
        placement = drain_placement(pin)
        rows = run_drain(names, tasks=tasks, concurrency=concurrency, ledger_modes=modes,
                         redis_url=redis_url, output=output, workload=workload, repeat=repeat, placement=placement,
                         paired=paired, seconds=round_seconds, say=lambda t: console.print(f"[dim]{escape(t)}[/]"))
    except (ValueError, HarnessError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(os_error(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)
    ratios = ledger_ratios(rows)
    if format == "json":
        import json
        import sys

        sys.stdout.write(json.dumps({"tasks": tasks, "workload": workload, "concurrency": concurrency,
                                     "method": "paired" if paired else "alternating",
                                     "placement": placement.to_dict(), "backends": ratios, "rows": rows},
                                    indent=1) + "\n")
        return
    _drain_table(rows, ratios, tasks=tasks, workload=workload, concurrency=concurrency, paired=paired)


def _drain_modes(ledger: str, repeat: int | None, method: str | None) -> tuple[list[bool], int, bool]:
    """``--ledger``, ``--repeat`` and ``--method`` checked together: the ledger modes, the rounds per mode
    and whether the two modes drain at once."""
    modes = {"on": [True], "off": [False], "both": [True, False]}.get(ledger)
    if repeat is None:  # a median of 3 rounds still moved by ±5 %, of 5 by ±2 % (docs/benchmarks.md)
        repeat = 5 if ledger == "both" else 1
    if modes is None:
        fail(f"--ledger must be on, off or both, not {ledger!r}")
    if method not in (None, "paired", "alternating"):
        fail(f"--method must be paired or alternating, not {method!r}")
    if method == "paired" and ledger != "both":
        fail("--method paired needs --ledger both (it drains both modes at once)")
    return modes, repeat, ledger == "both" and method != "alternating"


def _drain_table(rows: list[dict[str, Any]], ratios: dict[str, dict[str, Any]], *, tasks: int, workload: str,
                 concurrency: int, paired: bool) -> None:
    """The drain's rounds as a table on stdout, then each backend's ledger ratio as a sentence."""
    from rich.console import Console
    from rich.table import Table

    who = ("two worker processes at once, side by side, the ledger on in one and off in the other" if paired
           else "one worker process")
    table = Table(title=f"drain of {tasks} {workload} tasks by {who} (concurrency {concurrency})")
    steady_head = "tasks/s, both running (10-90 %)" if paired else "steady tasks/s (10-90 %)"
    for col in ("backend", "version", "round", "ledger", "enqueue/s (no HTTP)", "drain s", "drain tasks/s",
                steady_head, "worker CPU µs/task", "executed"):
        table.add_column(col)
    for row in rows:
        steady = row.get("steady_per_s")
        cpu = row.get("worker_cpu_us_per_task")
        table.add_row(row["backend"], str(row["version"]), str(row["round"] + 1), "on" if row["ledger"] else "off",
                      f"{row['enqueue_per_s']:.0f}", f"{row['drain_s']:.2f}", f"{row['drain_per_s']:.0f}",
                      "–" if steady is None else f"{steady:.0f}", "–" if cpu is None else f"{cpu:.0f}",
                      str(row["executed"]))
    Console().print(table)
    for name, entry in ratios.items():
        Console().print(_ratio_line(name, entry))


def _ratio_line(name: str, entry: dict[str, Any]) -> str:
    """One backend's ledger ratio as a sentence (paired: the median of the rounds' ratios and their range),
    with the worker's CPU per task in both modes and the ledger's own cost in µs a task."""
    if entry["ratio"] is None:
        return f"{name}: no ledger ratio (both modes need a measured rate)"
    text = f"{name}: drain rate ledger on ÷ off = {entry['ratio']:.3f}"
    rounds = [r for r in entry.get("ratio_rounds", []) if r is not None]
    if rounds:
        text += f" (median of {len(rounds)} paired rounds, {min(rounds):.3f} to {max(rounds):.3f})"
    if entry["cpu_ratio"] is not None:
        text += (f"; worker CPU per task off ÷ on = {entry['cpu_ratio']:.3f} ({entry['cpu_off_us_per_task']:.0f} → "
                 f"{entry['cpu_on_us_per_task']:.0f} µs)")
    cost = entry.get("ledger_us_per_task")
    if cost is not None:
        spread = [r for r in entry.get("ledger_us_rounds", []) if r is not None]
        within = f", rounds {min(spread):+.0f} to {max(spread):+.0f}" if len(spread) > 1 else ""
        text += f"; the ledger costs {cost:+.0f} µs of worker CPU a task{within}"
    return text


def overhead(
    backends: Annotated[str, typer.Option(help="comma-separated backends, or 'all'")] = "all",
    users: Annotated[int, params.option("users")] = params.default("users"),
    requests: Annotated[int, typer.Option(min=100, max=1_000_000, help="requests per server and round (together: "
                                                                      "for the first of a pair)")] = 5_000,
    duration: Annotated[float, typer.Option(help="most seconds per server and round",
                                            **Duration(1, 600).settings())] = 30.0,
    repeat: Annotated[int, typer.Option(min=1, max=20, help="rounds; the servers' order changes each round")] = 3,
    warmup: Annotated[int, typer.Option(min=0, max=100_000, help="warm-up requests per server start")] = 500,
    method: Annotated[str, typer.Option(
        "--method", help="together: a round's three servers side by side on the API's cores, loaded two at a time "
                         "(the floor and our API, then the ceiling and the floor) until the first of a pair has had "
                         "--requests: a pair's rates over the same seconds, the ratio the median of the rounds' "
                         "ratios | sequential: one server after another (solo latencies)",
    )] = "together",
    api_setting: Annotated[list[str] | None, typer.Option(
        "--api-setting", help="NAME=VALUE: a TASKBENCH_NAME setting of the reference API (repeatable); "
                              "its defaults otherwise")] = None,
    floor_gc_freeze: Annotated[bool, typer.Option(
        "--floor-gc-freeze", help="gc.freeze() the ceiling and the floor too once their app is built, as the "
                                  "reference API does (TASKBENCH_GC_FREEZE): the same runtime for all three")] = False,
    redis_url: Annotated[str | None, params.option("redis_url")] = params.default("redis_url"),
    pin: Annotated[str, typer.Option(help="core placement, as for `run`")] = "auto",
    format: Annotated[str, typer.Option("--format", help="table | json (the ratio per backend)")] = "table",
    output: Annotated[Path, typer.Option(help="folder for the result and logs")] = Path("results"),
) -> None:
    """What taskbench costs: per backend the ceiling, the library's floor and the reference API, loaded alike."""
    import json
    import sys

    from rich.console import Console
    from rich.markup import escape

    from taskbench.driver import LoadSpec
    from taskbench.harness import HarnessError
    from taskbench.harness.commands.overhead import OverheadConfig, run_overhead
    from taskbench.harness.config import Placement
    from taskbench.report import overhead as view

    if format not in ("table", "json"):
        fail(f"--format must be table or json, not {format!r}")
    console = Console(stderr=True)
    show_progress(console)
    api_env: dict[str, str] = {}
    for item in api_setting or []:
        name, sep, value = item.partition("=")
        if not sep or not name.replace("_", "").isalnum():
            fail(f"--api-setting takes NAME=VALUE (a TASKBENCH_* setting without the prefix), not {item!r}")
        api_env[f"TASKBENCH_{name.upper()}"] = value
    writable_folder(output)
    interrupt_on_signals()
    try:
        config = OverheadConfig(
            backends=backend_names(backends), rounds=repeat, warmup=warmup, redis_url=redis_url,
            load=LoadSpec(users=users, requests=requests, duration=duration), placement=Placement.parse(pin),
            output=output, api_env=api_env, floor_gc_freeze=floor_gc_freeze, method=method)
        result, path = run_overhead(config, say=lambda t: console.print(f"[dim]{escape(t)}[/]"))
    except (ValueError, HarnessError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(os_error(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)
    from taskbench.cli.report import publish

    publish(result, path, output, say=lambda t: console.print(f"[dim]{escape(t)}[/]"))
    if format == "json":
        sys.stdout.write(json.dumps(view.ratios(result, str(path)), indent=1) + "\n")
    else:
        view.render(result, Console())
        console.print(f"result: {path}", markup=False)
    if not result.passed():
        raise typer.Exit(1)
