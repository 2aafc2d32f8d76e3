"""What the commands share: one-line errors, option types, the TASKBENCH_* export, interrupts."""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from taskbench.harness.commands.run import Runner
    from taskbench.harness.commands.target import TargetRunner
    from taskbench.results import Result
    from taskbench.scenarios.run import ScenarioRunner
    from taskbench.settings import Settings

Backend = Annotated[
    str | None, typer.Option("--backend", "-b", help="backend name (default: TASKBENCH_BACKEND)")
]
RedisUrl = Annotated[str | None, typer.Option(help="Redis URL (default: TASKBENCH_REDIS_URL)")]
RunId = Annotated[str | None, typer.Option(help="key namespace of the run (default: TASKBENCH_RUN_ID)")]
BrokerOpt = Annotated[str | None, typer.Option(help="redis | rabbitmq | nats (default: TASKBENCH_BROKER)")]
BrokerUrl = Annotated[str | None, typer.Option(help="broker URL (default: the broker's local default)")]


_Command = TypeVar("_Command", bound=Callable[..., Any])


class FiniteCommand(TyperCommand):
    """A command whose every number is finite: the one check of NaN and infinities on the command line.

    Click's float type reads ``nan``, ``inf`` and ``1e999``, and its range check lets NaN through (every
    comparison with NaN is false): ``--soak-memory-bound nan`` would judge any leak ok. Every value of
    every option and argument, a parser's result or a list's items too, is checked here once parsed."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        params: list[Any] = self.get_params(ctx)  # typer's own parameters, whatever its stubs say
        for param in params:
            value = ctx.params.get(param.name) if param.name else None
            for item in value if isinstance(value, list | tuple) else (value,):
                if isinstance(item, float) and not math.isfinite(item):
                    raise typer.BadParameter(f"must be a finite number, got {item}", ctx=ctx, param=param)
        return rest


class App(typer.Typer):
    """A typer app whose commands are :class:`FiniteCommand` (the main app and ``deploy``)."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[_Command], _Command]:
        kwargs.setdefault("cls", FiniteCommand)
        return super().command(*args, **kwargs)


def fail(message: str, code: int = 2) -> NoReturn:
    from taskbench.redaction import redact_text
    from taskbench.terminal import printable

    # a message may quote a file's text: its escapes are written out, never sent raw to the terminal
    typer.secho(f"taskbench: {printable(redact_text(message))}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


def say_on(console: Any) -> Callable[[str], None]:
    """What a run says as it goes, dimmed on ``console``: markup escaped, every URL's secrets masked (a
    line may quote --target, a --worker-cmd's REDIS_URL=…)."""
    from rich.markup import escape

    from taskbench.redaction import redact_text

    return lambda text: console.print(f"[dim]{escape(redact_text(text))}[/]")


def os_error(exc: OSError) -> str:
    """An OSError in one line: what failed on which file (a full disk, a read-only folder)."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


def writable_folder(folder: Path) -> None:
    """``--output``: created if missing and written to once, before anything starts; a folder that cannot
    be (read-only, a file in the way, no permission, a full disk) is one line naming it."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder) as probe:
            probe.write(b"taskbench")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        fail(f"--output {folder}: cannot write there ({exc.strerror or exc})")


def export(**values: object) -> None:
    """Command-line options override the TASKBENCH_* environment of this process and its children."""
    for key, value in values.items():
        if value is not None:
            os.environ[f"TASKBENCH_{key.upper()}"] = str(value)


def settings() -> Settings:
    from pydantic import ValidationError

    from taskbench import backends
    from taskbench.settings import Settings

    try:
        found = Settings()
        backends.info(found.backend)
    except ValidationError as exc:
        fail(f"invalid setting: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
    except ValueError as exc:
        fail(str(exc))
    return found


def backend_names(text: str, broker: str | None = None) -> list[str]:
    """``--backends``: comma-separated names, or ``all`` (every implemented backend but the unsafe seed
    wirings; with ``broker``, those that run on it)."""
    from taskbench import backends as registry

    if text == "all":
        return [name for name in registry.available() if broker is None or broker in registry.info(name).brokers]
    return [b.strip() for b in text.split(",") if b.strip()]


#: what a command says when SIGINT, SIGTERM or SIGHUP stopped it (exit 130)
INTERRUPTED = "interrupted; every process it started was stopped"


#: the signals that stop a command as Ctrl-C does: SIGHUP is a closed terminal or a dropped ssh session
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interrupt_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so the stop path runs, stops every process and
    writes the interrupted result.

    SIGINT is set explicitly: a shell starts a background job with SIGINT ignored, and Python keeps
    an inherited "ignore", so ``taskbench run &`` could otherwise not be interrupted. After a SIGHUP the
    terminal may be gone: what is still said goes nowhere rather than failing the stop path
    (:func:`_detach_hung_up_terminal`).
    """

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    def on_hangup(signum: int, frame: object) -> None:
        _detach_hung_up_terminal()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_hangup)


def _detach_hung_up_terminal() -> None:
    """Point stdout and stderr at /dev/null where they are a terminal that hung up (even an empty write
    fails there, with EIO; a pipe or a file takes it): the lines after a hang-up have no reader, and the
    result file says what they would."""
    for fd in (1, 2):
        try:
            os.write(fd, b"")
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)


def execute(runner: Runner | ScenarioRunner | TargetRunner, console: Any) -> Result:
    """Run a Runner, ScenarioRunner or TargetRunner: SIGTERM and SIGHUP act as Ctrl-C, errors become one line.

    Whether the result passed is :meth:`Result.passed` (one rule, :func:`taskbench.results.passed`).
    """
    from taskbench.harness import HarnessError

    writable_folder(runner.out_dir.parent)
    interrupt_on_signals()
    try:
        result = runner.run()
    except HarnessError as exc:
        fail(str(exc))
    except OSError as exc:  # a file of the run could not be written: the disk filled up, a folder went away
        fail(os_error(exc))
    except KeyboardInterrupt:
        fail(INTERRUPTED, code=130)
    return result


def show_progress(console: Any) -> None:
    """Live progress of the phases on ``console``: a display on a terminal, plain lines in a log."""
    from taskbench.harness.progress import Reporter, install

    install(Reporter(console))
