"""The second half of ``docs/reference.md``: a scenario file's keys (what ``taskbench scenarios --parameters``
shows), where each run parameter applies (:data:`taskbench.params.SCHEMA`) and each library's settings (the
backend packages' ``Options`` models, as ``taskbench backends`` lists them)."""

from __future__ import annotations

from typing import Any

from taskbench import backends, params
from taskbench.backends.options import describe
from taskbench.cli.docs.markdown import code, table


def render() -> list[str]:
    return [*_scenario_keys(), *_parameters(), *_libraries()]


def _value(value: Any) -> str:
    if value is None:
        return ""
    return code(str(value).lower() if isinstance(value, bool) else value)


def _scenario_keys() -> list[str]:
    from taskbench.scenarios.checks import FIGURES, PARAMETERS

    lines = ["## Scenario files", "",
             "A case of a scenario file takes the parameters of its `kind`, in `[defaults]`, `[matrix]`, "
             "`[[case]]` or a `[profile.NAME]` (the file's layout: docs/scenarios.md); "
             "`taskbench scenarios --parameters` lists the same.", ""]
    for kind, taken in PARAMETERS.items():
        rows = [(code(name), param.describe(), _value(param.default_for(kind)), param.help)
                for name, param in sorted(taken.items())]
        lines += [f"### `kind = \"{kind}\"`", "", *table(("key", "type", "default", "help"), rows), ""]
    figures = ", ".join(f"{code(name)} ({kind.__name__})" for name, kind in FIGURES.items())
    return [*lines, f"An article's figures (`[[article.rows]]`, beside `match`): {figures}.", ""]


def _parameters() -> list[str]:
    rows = []
    for param in params.SCHEMA:
        default = _value(param.default)
        for kind, other in param.kind_defaults.items():
            default += f" ({kind}: {_value(other)})"
        env = ""
        if param.env:
            env = f"{code('TASKBENCH_' + param.env)} ({', '.join(param.components)})"
        rows.append((code(param.name), param.describe(), default, code(param.flag) if param.cli else "",
                     ", ".join(param.kinds), env, param.help))
    headers = ("parameter", "type", "default", "`taskbench run`", "scenario kinds", "environment", "help")
    return ["## Run parameters", "",
            "Each parameter of a run, declared once (`src/taskbench/params.py`), and where it applies: an option "
            "of `taskbench run`, a key of the scenario kinds' cases, a `TASKBENCH_*` variable of the API and "
            "worker processes. A name of two entries means something else in a kind of its own.", "",
            *table(headers, rows), ""]


def _libraries() -> list[str]:
    lines = ["## Library settings", "",
             "A library's own settings, with the library's defaults: `--option LIB.KEY=VALUE` on the command "
             "line (repeat it for more), `[options.LIB]` or `options.LIB.KEY = VALUE` in a scenario file; the "
             "processes get them as `TASKBENCH_OPTIONS` (JSON). A setting that changes the promise is recorded "
             "by every case (docs/promises.md).", ""]
    for library, model in backends.libraries().items():
        users = [meta.name for meta in backends.REGISTRY.values() if meta.extra == library]
        rows = [(code(f"{library}.{key}"), kind, "yes" if key in model.promise_fields else "", text)
                for key, kind, text in describe(model)]
        lines += [f"### `{library}`", "", "Backends: " + ", ".join(code(name) for name in users) + ".", "",
                  *table(("setting", "type", "changes the promise", "default and help"), rows), ""]
    return lines
