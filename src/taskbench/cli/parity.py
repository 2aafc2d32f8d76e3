"""``taskbench parity``: each library's own published no-op drain benchmark beside ``taskbench drain``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taskbench.cli._common import INTERRUPTED, fail, interrupt_on_signals, os_error, show_progress, writable_folder
from taskbench.units import Duration

#: a parity.json larger than this is not one that `parity` wrote
PARITY_BYTES = 16 * 1024 * 1024


def parity(
    sources: Annotated[str, typer.Option(
        help="published benchmarks, comma-separated: streaq, saq, python_queue_benchmark, or all")] = "all",
    backends: Annotated[str, typer.Option(
        help="only these backends of them, comma-separated (`taskbench parity --help` lists the benchmarks; "
             "each backend's package declares its runs), or all")] = "all",
    repeat: Annotated[int, typer.Option(
        min=1, max=20, help="interleaved rounds (script, drain off, drain on; then backwards); medians")] = 3,
    tasks: Annotated[int | None, typer.Option(
        min=10, max=1_000_000, help="tasks per run instead of each benchmark's published count")] = None,
    ledger: Annotated[str, typer.Option(
        help="the drain's ledger: off | on | both, or none: the library's script alone, no drain beside it (a "
             "published benchmark at its published scale)")] = "both",
    script_timeout: Annotated[float, typer.Option(
        help="seconds a library's script may take to drain its tasks", **Duration(10, 7200).settings())] = 600.0,
    pin: Annotated[str, typer.Option(
        help="core placement: auto (the worker or script alone on one core, Redis on the others), off, or "
             "roles as for `run` (workers, redis, driver)")] = "auto",
    versions: Annotated[str, typer.Option(
        help="lock (each library as uv.lock pins it) or a pinned environment of an article's versions "
             "(pinned/<name>/: article-000 holds arq 0.25.0 and saq 0.12.4)")] = "lock",
    format: Annotated[str, typer.Option("--format", help="markdown | json")] = "markdown",
    source_files: Annotated[list[Path] | None, typer.Option(
        "--from", help="render this parity.json again instead of running (repeat it: several as one)")] = None,
    output: Annotated[Path, typer.Option(help="folder for logs and parity.json")] = Path("results"),
) -> None:
    """Each library's own published no-op drain benchmark (streaq's and SAQ's benchmarks/,
    steventen/python_queue_benchmark), rewritten as a script of the same shape and run here, beside
    `taskbench drain --workload noop` with the same task count and concurrency, ledger off and on:
    both on one private Redis, interleaved; medians with ranges and the rankings side by side."""
    import json
    import sys

    from rich.console import Console
    from rich.markup import escape

    from taskbench.backends.shapes import SOURCES, source
    from taskbench.report.parity import markdown

    if format not in ("markdown", "json"):
        fail(f"--format must be markdown or json, not {format!r}")
    modes = {"off": (False,), "on": (True,), "both": (False, True), "none": ()}.get(ledger)
    if modes is None:
        fail(f"--ledger must be off, on, both or none, not {ledger!r}")
    if source_files:
        _render_again(source_files, format)
        return
    try:
        chosen = list(SOURCES) if sources == "all" else [source(n.strip()) for n in sources.split(",") if n.strip()]
    except ValueError as exc:
        fail(str(exc))
    known = {shape.library for s in chosen for shape in s.shapes}
    wanted = None if backends == "all" else [n.strip() for n in backends.split(",") if n.strip()]
    unknown = sorted(set(wanted or ()) - known)
    if unknown:
        fail(f"--backends: {', '.join(unknown)} in none of the sources chosen; they have {', '.join(sorted(known))}")
    from taskbench.harness import HarnessError
    from taskbench.harness.commands.parity import run_parity

    console = Console(stderr=True)
    show_progress(console)
    writable_folder(output)
    interrupt_on_signals()
    try:
        result = run_parity(chosen, rounds=repeat, output=output, libraries=wanted, tasks=tasks, ledger=modes,
                            timeout=script_timeout, pin=pin, versions_set=versions,
                            say=lambda t: console.print(f"[dim]{escape(t)}[/]"))
    except (ValueError, HarnessError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(os_error(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)
    sys.stdout.write((json.dumps(result, indent=1) if format == "json" else markdown(result)) + "\n")
    console.print(f"[dim]parity.json and the logs: {escape(result['folder'])}[/]")


def _render_again(source_files: list[Path], format: str) -> None:
    """``--from``: the parity.json files given, merged and written again as markdown or JSON."""
    import json
    import sys

    from taskbench import inputs
    from taskbench.report.parity import markdown, merge

    results = []
    for path in source_files:
        try:
            results.append(json.loads(inputs.read_text(path, PARITY_BYTES)))
        except inputs.InputError as exc:
            fail(f"cannot read {path}: {exc}")
        except (ValueError, RecursionError) as exc:
            fail(f"{path}: not a parity.json ({str(exc).splitlines()[0]})")
    try:
        result = merge(results)
        text = markdown(result)
    except (KeyError, TypeError) as exc:
        fail(f"{', '.join(map(str, source_files))}: not a parity.json (no {exc})")
    sys.stdout.write((json.dumps(result, indent=1) if format == "json" else text) + "\n")
