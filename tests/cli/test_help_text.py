"""Every command's --help, hidden ones too: no help text loses a bracketed part to rich's markup, an option's
name keeps one meaning across the commands, and every duration or percentage takes the one parser."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, get_args

import pytest
import typer
from typer.testing import CliRunner

from taskbench.cli import app
from taskbench.units import Duration, Percent

WIDE = 2000  # one line per option: a help text is never wrapped apart


def _commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    command = command if command is not None else typer.main.get_command(app)
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def _options() -> Iterator[tuple[str, Any]]:
    for path, command in _commands():
        for param in command.params:
            if type(param).__name__.endswith("Option"):
                yield " ".join(path), param


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("│", " ")).strip()


def _lost(typer_app: typer.Typer, path: tuple[str, ...], command: Any) -> list[str]:
    """The help texts of ``command`` (its own, its options') that its rendered --help does not show whole."""
    out = CliRunner().invoke(typer_app, [*path, "--help"], terminal_width=WIDE, env={"COLUMNS": str(WIDE)})
    assert out.exit_code == 0, out.output
    shown = _flat(out.output)
    texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
    wanted = [_flat(part.replace("\\[", "[")) for text in texts for part in text.split("\n\n")]
    return [text for text in wanted if text and text not in shown]


def test_the_check_finds_a_bracket_rich_ate() -> None:
    probe = typer.Typer()

    @probe.command()
    def main(profile: str = typer.Option("", help="apply the file's [profile.NAME], e.g. article")) -> None:
        """Probe."""

    (command,) = [c for _, c in _commands(typer.main.get_command(probe))]
    assert _lost(probe, (), command) == ["apply the file's [profile.NAME], e.g. article"]


@pytest.mark.parametrize("path", [" ".join(path) for path, _ in _commands()])
def test_every_help_text_is_shown_whole(path: str) -> None:
    command = dict((" ".join(p), c) for p, c in _commands())[path]
    assert _lost(app, tuple(path.split()), command) == []


def _meanings(name: str) -> dict[str, str]:
    return {command: param.help for command, param in _options() if name in param.opts}


def test_a_name_keeps_one_meaning_in_every_command() -> None:
    names = {opt for _, param in _options() for opt in param.opts}
    assert not names & {"--library", "--libraries", "--rounds"}, "one concept, one name: --backend(s), --repeat"
    assert len(set(_meanings("--timeout").values())) == 1, _meanings("--timeout")  # a request's timeout
    assert len(set(_meanings("--workers").values())) == 1, _meanings("--workers")  # a backend's worker processes
    for command, text in _meanings("--output").items():
        assert "folder" in text, f"{command} --output is a folder in every command; a file is --out-file"
    for command, text in _meanings("--backends").items():
        assert "comma-separated" in text, command


def _is_number(param: Any) -> bool:
    """A float option (``--soak``, a string, may be given alone and is read by the same parser)."""
    annotation = param.type_descriptor.annotation
    return float in (annotation, *get_args(annotation))


def _parser(param: Any) -> Any:
    return getattr(param.type_descriptor.parameter_info, "parser", None)


_DURATION = re.compile(r"\b(seconds|milliseconds)\b|, ms$")


def test_every_duration_and_percentage_takes_the_one_parser() -> None:
    durations = [(command, param) for command, param in _options() if _is_number(param) and (
        _DURATION.search(param.help or "") or re.search(r"(timeout|delay|duration|seconds)$", param.name))]
    assert len(durations) > 25
    for command, param in durations:
        assert isinstance(_parser(param), Duration), f"{command} {param.opts[0]} takes 30s, 2m, 1h"
    percents = [(command, param) for command, param in _options()
                if re.search(r"%|percent", param.help or "") and param.name != "fail_if"]
    assert {param.name for _, param in percents} >= {"threshold", "max_backlog_growth", "soak_share",
                                                      "soak_latency_bound"}
    for command, param in percents:
        assert isinstance(_parser(param), Percent), f"{command} {param.opts[0]} takes 5 or 5%"
