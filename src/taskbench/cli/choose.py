"""``taskbench choose``: which backend, and how many workers, for your task at your rate with your guarantee."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskbench import params
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
from taskbench.units import Duration

if TYPE_CHECKING:
    from taskbench.results.choose import ChooseResult, Constraints

TASK = "Your task and its constraints"
RUN = "Candidates, budget and output"


def choose(
    workload: Annotated[str, params.option("workload", "--workload", "-w", rich_help_panel=TASK)] = "io/simple",
    payload: Annotated[str | None, params.option("payload", "--payload", "-p", rich_help_panel=TASK)] = None,
    with_packages: Annotated[list[str] | None, typer.Option(
        "--with", rich_help_panel=TASK,
        help="with your own task: a package installed into every backend's environment; repeat for more")] = None,
    task_paths: Annotated[list[str] | None, typer.Option(
        "--path", rich_help_panel=TASK,
        help="with your own task: a folder importable in every backend's environment; repeat for more")] = None,
    rate: Annotated[float | None, typer.Option(
        "--rate", "-r", min=1, max=20_000, rich_help_panel=TASK,
        help="the tasks per second the service must sustain (default: the highest one is searched)")] = None,
    p95: Annotated[float | None, typer.Option(
        "--p95", rich_help_panel=TASK, **Duration(1, 3_600_000, "ms").settings(),
        help="the end-to-end objective: the p95 of the time from a request to its task's run (ms, or 2s; "
             "default 1 s)")] = None,
    promise: Annotated[str | None, typer.Option(
        "--promise", rich_help_panel=TASK,
        help="the guarantee required: at-least-once | any (any: an at-most-once backend may be chosen; "
             "default at-least-once)")] = None,
    max_workers: Annotated[int | None, typer.Option(
        "--max-workers", min=1, max=64, rich_help_panel=TASK,
        help="the most worker processes the answer may use (default: the cores here)")] = None,
    broker: Annotated[str | None, typer.Option(
        "--broker", rich_help_panel=RUN,
        help="every backend on this broker (default: each on its own default one)")] = None,
    backends: Annotated[str | None, typer.Option(
        "--backends", "-b", rich_help_panel=RUN,
        help="comma-separated candidates (default: background and every durable backend)")] = None,
    quick: Annotated[bool, typer.Option(
        rich_help_panel=RUN,
        help="shorter stages (about 5 min here): short drains, two finalists, 3 s search steps, no soak")] = False,
    from_dir: Annotated[Path | None, typer.Option(
        "--from", rich_help_panel=RUN,
        help="a choose run's folder: render its answer again from its figures, with no new measurement "
             "(another --rate or --promise gives another answer)")] = None,
    output: Annotated[Path, typer.Option(
        rich_help_panel=RUN, help="folder for the choose run (with its runs' results)")] = Path("results"),
) -> None:
    """Which backend, and how many workers, for your task at your rate with your guarantee.

    A screen of every candidate, then the finalists through the HTTP API and under faults: one sentence,
    one page. Exit 1 when a backend broke its own promise."""
    import shlex
    import sys

    from rich.console import Console

    from taskbench.harness import HarnessError
    from taskbench.harness.commands.choose import FULL, QUICK, Chooser, usable_cores
    from taskbench.redaction import redact_argv
    from taskbench.results.choose import Constraints

    if promise not in (None, "at-least-once", "any"):
        fail(f"--promise must be at-least-once or any, not {promise!r}")
    given = {"rate": rate, "p95_ms": p95, "promise": promise, "max_workers": max_workers}
    if from_dir is not None:
        _again(from_dir, {k: v for k, v in given.items() if v is not None})
        return
    console = Console(stderr=True)
    names, base = _candidates(backends, broker, workload=workload, payload=payload,
                              with_packages=tuple(with_packages or ()), task_paths=tuple(task_paths or ()))
    constraints = Constraints.model_validate({
        "workload": workload, "payload": payload, "rate": rate, "p95_ms": p95 or 1000.0,
        "promise": promise or "at-least-once", "max_workers": max_workers or usable_cores(), "broker": broker})
    writable_folder(output)
    interrupt_on_signals()
    show_progress(console)
    chooser = Chooser(names, base, constraints, QUICK if quick else FULL, output, quick=quick,
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
    _write(result, chooser.out)


def _candidates(backends: str | None, broker: str | None, **task: Any) -> tuple[list[str], Any]:
    """The candidates (``--backends``, else background and every durable backend, on ``--broker`` those
    that run on it) and the run's configuration of the task; a bad name or task is one line."""
    from taskbench import backends as registry
    from taskbench.harness.commands.choose import candidates
    from taskbench.harness.config import RunConfig

    try:
        names = backend_names(backends, broker) if backends else [
            name for name in candidates() if broker is None or broker in registry.info(name).brokers]
        for name in names:
            registry.info(name)
        return names, RunConfig(backends=tuple(names), broker=broker, **task)
    except (ValueError, KeyError) as exc:
        fail(str(exc).strip("'\""))


def _write(result: ChooseResult, folder: Path, k: Constraints | None = None) -> None:
    """choose.json and choose.html in ``folder``, the answer on stdout; exit 1 on a broken promise.
    ``k``: other constraints than the run's (``--from``)."""
    from taskbench.files import write_atomic
    from taskbench.report.choose import render, terminal_lines

    lines = terminal_lines(result, k)
    page = folder / "choose.html"
    try:
        if k is None:  # the run's own answer is kept with its figures; --from leaves them as they were
            result.recommendation = lines
            write_atomic(folder / "choose.json", result.model_dump_json(indent=1))
        write_atomic(page, render(result, k))
    except OSError as exc:
        fail(os_error(exc))
    for line in lines:
        typer.echo(line)
    typer.echo(f"choose: {page} ({result.elapsed_s / 60:.1f} min); figures in {folder / 'choose.json'}", err=True)
    if result.broken():
        raise typer.Exit(1)


def _again(folder: Path, given: dict[str, object]) -> None:
    """``--from``: the answer of a kept choose run under its constraints with ``given`` put in their place."""
    import json

    from pydantic import ValidationError

    from taskbench.results.choose import ChooseResult

    path = folder / "choose.json"
    if not path.is_file():
        fail(f"--from {folder}: no choose.json there (a folder `taskbench choose` wrote)")
    try:
        result = ChooseResult.model_validate(json.loads(path.read_text()))
    except (ValueError, ValidationError, OSError) as exc:
        fail(f"--from {folder}: {path.name} is not a choose result: {str(exc).splitlines()[0]}")
    constraints = result.constraints.model_copy(update=given)
    _write(result, folder, constraints)
