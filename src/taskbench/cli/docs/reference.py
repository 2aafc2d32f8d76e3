"""``docs/reference.md``: every command's options, read from the typer app, then the scenario files' keys,
where each run parameter applies (:mod:`taskbench.params`) and the libraries' settings."""

from __future__ import annotations

from typing import Any

import typer

from taskbench.cli.docs import settings_reference
from taskbench.cli.docs.markdown import cell, code, number, table

#: hidden from ``--help`` but a user's: the commands that measure one layer, named in its epilog
ONE_LAYER = ("drain", "overhead", "ceiling", "parity")
_HEADERS = ("option", "type", "default", "help")


def render() -> str:
    from taskbench.cli import app

    commands = _commands(typer.main.get_command(app))
    lines = ["# Command-line reference", "",
             "Every option of every command, the keys of a scenario file, where each run parameter applies and "
             "each library's settings. Generated from the code by `python -m taskbench.docs`; do not edit.", "",
             "A `<duration>` is `30s`, `2m`, `1h`, `250ms` or a number of seconds (of milliseconds where its help "
             "says ms); a `<percent>` is `5` or `5%`.", ""]
    for name, command in commands:
        if not command.hidden or name in ONE_LAYER:
            lines += _command(name, command)
    lines += settings_reference.render()
    internal = [(name, command) for name, command in commands if command.hidden and name not in ONE_LAYER]
    lines += ["## Internal commands", "",
              "Hidden from `--help`: the processes the harness, the compose file and the Kubernetes manifests "
              "start. Each has `--help`.", ""]
    lines += table(("command", "what it does"), ((code(f"taskbench {name}"), _summary(command))
                                                 for name, command in internal))
    return "\n".join([*lines, ""])


def _commands(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every command in the order the app registers them; a group's (``deploy k8s``) in its place."""
    found: list[tuple[str, Any]] = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found += _commands(command, f"{prefix}{name} ")
        else:
            found.append((f"{prefix}{name}", command))
    return found


def _summary(command: Any) -> str:
    """The first paragraph of a command's help."""
    return " ".join((command.help or "").strip().split("\n\n")[0].split())


def _command(name: str, command: Any) -> list[str]:
    lines = [f"## `taskbench {name}`", "", cell(_summary(command)), ""]
    params = [p for p in command.params if not p.hidden]
    panels = list(dict.fromkeys(getattr(p, "rich_help_panel", None) for p in params))  # first seen first
    for panel in panels:
        if len(panels) > 1:
            lines += [f"### {panel or 'Other options'}", ""]
        rows = [_row(p) for p in params if getattr(p, "rich_help_panel", None) == panel]
        lines += [*table(_HEADERS, rows), ""]
    if not params:
        lines += ["No options.", ""]
    return lines


def _row(param: Any) -> tuple[str, str, str, str]:
    if param.param_type_name == "argument":
        flags = f"{code(param.name.upper())} (argument)"
    else:
        flags = ", ".join(code(flag) for flag in [*param.opts, *param.secondary_opts])
    return flags, _type(param), _default(param), param.help or ""


def _type(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    descriptor = param.type_descriptor
    if descriptor.is_choice:
        kind = " | ".join(str(choice) for choice in descriptor.choices or ())
    else:
        kind = param.metavar or param.bare_type().removeprefix("list[").removesuffix("]")
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        kind = f"{kind} {number(low)}..{number(high)}"
    elif low is not None:
        kind = f"{kind} ≥ {number(low)}"
    elif high is not None:
        kind = f"{kind} ≤ {number(high)}"
    if descriptor.is_list:
        kind += (", one or more" if param.param_type_name == "argument" else ", repeatable")
    return kind


def _default(param: Any) -> str:
    if param.required:
        return "required"
    value = param.default
    if value is None or value == [] or value == ():
        return ""
    if isinstance(value, bool):
        return code(str(value).lower())
    return code(value) if str(value) else code('""')
