"""Command line: ``taskbench run | choose | compare | report | backends | scenarios | up | collect | deploy``.

One module per command or small group; this one makes the app and registers them, in the order
``--help`` lists them. The commands that measure one layer (drain, overhead, ceiling, parity) are named in
the epilog; the processes the harness starts (serve, worker, drive, collector) are hidden. Heavy imports
(FastAPI, uvicorn, the harness, rich tables) happen inside the commands, so that ``--help`` is instant and
a missing extra gives an install hint instead of a traceback.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from taskbench.cli import (
    choose,
    compare,
    components,
    deploy,
    measure,
    parity,
    report,
    run,
    scaleout,
    scenarios,
    soak,
    up,
)
from taskbench.cli._common import App


class _App(App):
    """The app, taking ``--soak`` without its value (:func:`taskbench.cli.soak.with_optional_values`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and "args" not in kwargs:
            kwargs["args"] = soak.with_optional_values(sys.argv[1:])
        return super().__call__(*args, **kwargs)


app = _App(
    add_completion=False,
    no_args_is_help=True,
    help="Benchmark and audit FastAPI background-task backends on your own hardware.",
    epilog="One layer alone: drain (the workers, no HTTP), overhead (the API's cost), ceiling (the machine's "
           "HTTP ceiling), parity (a library's published benchmark). Each has --help.",
)

def _version(given: bool) -> None:
    if given:
        from importlib.metadata import version

        typer.echo(f"taskbench {version('taskbench')}")
        raise typer.Exit


@app.callback()
def _main(version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_version, help="print taskbench's version and exit")] = False,
) -> None:
    """Benchmark and audit FastAPI background-task backends on your own hardware."""


# what a user runs, in the order --help lists them
app.command()(run.run)
app.command()(choose.choose)
app.command()(compare.compare)
app.command()(report.report)
app.command()(components.backends)
app.command("scenarios")(scenarios.list_scenarios)
app.command()(up.up)
app.command()(scaleout.collect)
# one layer measured alone: named in the epilog, apart from the main commands
app.command(hidden=True)(measure.drain)
app.command(hidden=True)(measure.overhead)
app.command(hidden=True)(measure.ceiling)
app.command(hidden=True)(parity.parity)
# the processes the harness, the compose file and the k8s manifests start
app.command(hidden=True)(components.serve)
app.command(hidden=True)(components.worker)
app.command(hidden=True)(scaleout.drive)
app.command(hidden=True)(scaleout.collector)
app.command(hidden=True)(components.prepare)
app.command(hidden=True)(components.purge)
app.command(hidden=True)(components.dashboard)
app.command("drain-case", hidden=True)(components.drain_case)
app.add_typer(deploy.app, name="deploy")

__all__ = ["app"]
