"""NaN and the infinities are refused wherever a number is given: every float option of every command, every
number of a scenario file, the parameter schema, a soak's bounds; one line naming the option or the line."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from click.testing import Result as CliResult

from taskbench import params
from taskbench.cli import app
from taskbench.scenarios import ScenarioError, resolve
from tests.helpers import assert_one_line_error

Cli = Callable[..., CliResult]
NOT_FINITE = ("nan", "NaN", "inf", "-inf", "+Infinity", "1e999", "-1e400")


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def _float_options() -> list[tuple[tuple[str, ...], Any, Any]]:
    found = []
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if "float" in str(param.type_descriptor.annotation) and param.opts[0].startswith("--"):
                found.append((path, command, param))
    return found


def test_every_float_option_of_every_command_refuses_nan_and_the_infinities() -> None:
    options = _float_options()
    assert len(options) > 30 and any(p.opts[0] == "--soak-memory-bound" for _, _, p in options)
    # a required argument is given, so that the only problem of the command line is the number
    accepted = []
    for path, command, param in options:
        arguments = ["x" for p in command.params if p.param_type_name == "argument" and p.required]
        for text in NOT_FINITE:
            try:
                command.make_context(" ".join(path), [*arguments, param.opts[0], text])
            except typer.BadParameter as exc:
                refused = exc.param.name if exc.param is not None else None
            else:
                refused = None
            if refused != param.name:  # accepted, or refused for another reason than the number
                accepted.append((path, param.opts[0], text))
    assert not accepted


@pytest.mark.parametrize("text", NOT_FINITE)
def test_the_soak_memory_bound_is_one_line_and_judges_nothing(text: str, tmp_path: Path, cli: Cli) -> None:
    out = cli("run", "--soak", "30m", "--soak-memory-bound", text, "--output", str(tmp_path))
    assert_one_line_error(out, "must be a finite number")
    assert "--soak-memory-bound" in out.stderr


def test_a_finite_number_still_passes_the_check(tmp_path: Path, cli: Cli) -> None:
    # a bound out of its range is the range's error: the finite check says nothing about it
    out = cli("run", "--soak", "30m", "--soak-memory-bound", "0", "--output", str(tmp_path))
    assert_one_line_error(out, "must be finite and > 0")


def test_the_parameter_schema_and_a_soak_refuse_them_too() -> None:
    from taskbench.harness.soak.plan import SoakSpec

    for name in ("io_delay", "rate", "task_timeout", "broker_delay", "drain_stall"):
        for value in (float("nan"), float("inf"), float("-inf")):
            assert "must be a finite number" in (params.get(name).problem(value) or ""), (name, value)
        assert params.get(name).problem(params.get(name).bounds[0]) is None  # type: ignore[index]
    for field in ("memory_mb_per_h", "latency_share_per_h", "backlog_share_per_h"):
        for value in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match="finite and > 0"):
                SoakSpec(**{field: value})


def _scenario(folder: Path, extra: str, *, defaults: str = "") -> Path:
    path = folder / "numbers.toml"
    path.write_text(textwrap.dedent("""\
        name = "numbers"
        description = "numbers"
        kind = "queue"

        [options.saq]
        retries = 2

        [defaults]
        workload = "io/simple"
        requests = 10
        """) + defaults + textwrap.dedent("""
        [limits.small]
        api = { cpu = 0.5, memory_mb = 200 }

        [[case]]
        backend = "arq"
        """) + extra)
    return path


@pytest.mark.parametrize(("extra", "defaults", "line", "name"), [
    ("io_delay = nan\n", "", 17, "case.io_delay"),
    ("task_timeout = +inf\n", "", 17, "case.task_timeout"),
    ("", "io_delay = -inf\n", 11, "defaults.io_delay"),
    ("", "drain_timeout = 1e999\n", 11, "defaults.drain_timeout"),
    ("broker_delay = [0.0, nan]\n", "", 17, "case.broker_delay"),
    ("", "options.saq.retries = nan\n", 11, "defaults.options.saq.retries"),
    ("[[phases]]\nkind = \"steady\"\nduration = 10\nrate = nan\n", "", 20, "phases.rate"),
    ("[limits.big]\napi = { cpu = inf }\n", "", 18, "limits.big.api.cpu"),
    ("[[article.rows]]\nmatch = { backend = \"arq\" }\nrps = nan\n", "", 19, "article.rows.rps"),
])
def test_every_number_of_a_scenario_file_is_finite_or_an_error_naming_its_line(
        extra: str, defaults: str, line: int, name: str, tmp_path: Path, cli: Cli) -> None:
    path = _scenario(tmp_path, extra, defaults=defaults)
    message = f"{path}:{line}: {name} must be a finite number"
    with pytest.raises(ScenarioError, match=message.replace(".", r"\.")):
        resolve(str(path))
    assert_one_line_error(cli("run", "--scenario", str(path), "--output", str(tmp_path / "out")), message)


def test_a_scenario_of_finite_numbers_is_read(tmp_path: Path) -> None:
    cases = resolve(str(_scenario(tmp_path, "io_delay = 0.5\n"))).cases
    assert json.loads(json.dumps(cases[0].params))["io_delay"] == 0.5
