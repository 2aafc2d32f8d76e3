"""Command line: ``taskbench run | scenarios | up | serve | worker | report | compare | backends | ceiling | drain |
overhead``.

One module per command or small group; this one makes the app and registers them, in the order
``--help`` lists them. Heavy imports (FastAPI, uvicorn, the harness, rich tables) happen inside the
commands, so that ``--help`` is instant and a missing extra gives an install hint instead of a traceback.
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


class _App(typer.Typer):
    """The app, taking ``--soak`` without its value (:func:`taskbench.cli.soak.with_optional_values`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and "args" not in kwargs:
            kwargs["args"] = soak.with_optional_values(sys.argv[1:])
        return super().__call__(*args, **kwargs)


app = _App(
    add_completion=False,
    no_args_is_help=True,
    help="Benchmark and audit FastAPI background-task backends on your own hardware.",
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


app.command()(components.backends)
app.command()(components.serve)
app.command()(components.worker)
app.command()(run.run)
app.command("scenarios")(scenarios.list_scenarios)
app.command(hidden=True)(components.prepare)
app.command(hidden=True)(components.purge)
app.command(hidden=True)(components.dashboard)
app.command()(up.up)
app.command()(choose.choose)
app.command()(measure.ceiling)
app.command()(measure.drain)
app.command()(measure.overhead)
app.command()(parity.parity)
app.command("drain-case", hidden=True)(components.drain_case)
app.command()(report.report)
app.command()(compare.compare)
app.command()(scaleout.drive)
app.command()(scaleout.collector)
app.command()(scaleout.collect)
app.add_typer(deploy.app, name="deploy")

__all__ = ["app"]
