"""``taskbench choose``: every durable backend (or those asked) measured on what a user weighs, one page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taskbench.cli._common import (
    INTERRUPTED,
    backend_names,
    fail,
    interrupt_on_signals,
    os_error,
    say_on,
    show_progress,
    writable_folder,
)


def choose(
    backends: Annotated[str | None, typer.Option(
        help="comma-separated backends (default: every durable one: a queue that keeps an accepted task)")] = None,
    quick: Annotated[bool, typer.Option(
        help="shorter measurements: 3 s search steps, a 20 s soak, one drain round (docs/choose.md)")] = False,
    output: Annotated[Path, typer.Option(help="folder for the choose run (with its runs' results)")] = Path("results"),
) -> None:
    """Measure each backend's sustainable rate, its e2e p95 at half of it, its drain rate, a kill-worker and a
    restart-broker case and its memory over a short soak; write one page ranking them. Exit 1 when a backend
    broke its own promise."""
    import shlex
    import sys

    from rich.console import Console

    from taskbench import backends as registry
    from taskbench.files import write_atomic
    from taskbench.harness import HarnessError
    from taskbench.harness.commands.choose import FULL, QUICK, Chooser, durable_backends
    from taskbench.redaction import redact_argv
    from taskbench.report.choose import rank, render, terminal_lines

    console = Console(stderr=True)
    try:
        names = backend_names(backends) if backends else durable_backends()
        for name in names:
            registry.info(name)
    except (ValueError, KeyError) as exc:
        fail(str(exc).strip("'\""))
    writable_folder(output)
    interrupt_on_signals()
    show_progress(console)
    chooser = Chooser(names, QUICK if quick else FULL, output, quick=quick,
                      say=say_on(console),
                      command=shlex.join(redact_argv(["taskbench", *sys.argv[1:]])))
    try:
        result = chooser.run()
    except (ValueError, HarnessError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(os_error(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)
    result.rankings = rank(result)
    chooser.out.mkdir(parents=True, exist_ok=True)
    page = chooser.out / "choose.html"
    try:
        write_atomic(chooser.out / "choose.json", result.model_dump_json(indent=1))
        write_atomic(page, render(result))
    except OSError as exc:
        fail(os_error(exc))
    for line in terminal_lines(result):
        typer.echo(line)
    console.print(f"choose: {page} ({result.elapsed_s:.0f} s); figures in {chooser.out / 'choose.json'}",
                  markup=False)
    if result.broken():
        raise typer.Exit(1)
