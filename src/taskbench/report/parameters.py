"""A page's "Parameters" and libraries: the settings that differ from their defaults in view, the rest folded.

A run's config holds every field of its RunConfig (some fifty); a reader wants the few that were chosen.
A setting is at its default when it equals the schema's (``params.default``), a library option when it
equals the library's (its ``Options`` model), anything else when it is unset (None, empty).
"""

from __future__ import annotations

from typing import Any

from taskbench import params
from taskbench.report.page import esc, facts, flatten, table
from taskbench.results import Result

#: a load's fields (``load.*``, the driver's LoadSpec) by the schema's name where the two differ
LOAD_NAMES = {"ramp_per_s": "ramp", "processes": "driver_processes"}
#: what a plain ``taskbench run`` holds where the schema declares no default: RunConfig's fields the schema
#: does not name, and the 10000 requests of a load given neither --requests nor --duration (tests/report
#: checks them against RunConfig's)
RUN_DEFAULTS = {"output": "results", "keep": False, "late_grace": 2.0, "startup_timeout": 60.0,
                "load.requests": 10_000}
#: what the run works out itself, not a choice: where each process runs (--pin, else from the machine's
#: CPUs), and a drain that follows the backlog (run without --drain-timeout)
DERIVED = ("placement.", "drain_follows_backlog")


def _library_default(library: str, key: str, value: Any) -> bool:
    """``options.<library>.<key>`` equals the library's default (a library or key taskbench no longer
    knows: not a default, so it stays in view)."""
    from taskbench import backends

    model = backends.libraries().get(library)
    if model is None or key not in model.model_fields:
        return False
    try:  # the config keeps a value as given on the command line ("3"): the model converts it
        return key not in model.model_validate({key: value}).changed()
    except ValueError:
        return False


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and not value)


def at_default(name: str, value: Any) -> bool:
    """A flattened config key (``load.users``, ``options.saq.retries``) holds its default."""
    if _unset(value) or name.startswith(DERIVED):
        return True
    if name.startswith("options."):
        _, library, key = name.split(".", 2)
        return _library_default(library, key, value)
    if name in RUN_DEFAULTS:
        return bool(value == RUN_DEFAULTS[name])
    field = name.removeprefix("load.")
    param = params.by_attr().get(field) if field == name else _load_param(field)
    return param is not None and param.default is not None and bool(value == param.default)


def _load_param(field: str) -> params.Param | None:
    try:
        return params.get(LOAD_NAMES.get(field, field))
    except KeyError:
        return None


def split(config: dict[str, Any]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The config's settings as (changed, at their defaults), each in the config's order."""
    items = flatten(config)
    defaults = [at_default(name, value) for name, value in items]
    return ([i for i, d in zip(items, defaults, strict=True) if not d],
            [i for i, d in zip(items, defaults, strict=True) if d])


def parameters_html(config: dict[str, Any]) -> str:
    """The changed settings, then the others in a closed <details>."""
    changed, default = split(config)
    shown = facts(changed, wide=True) if changed else "<p class=\"note\">every parameter at its default</p>"
    folded = [(k, v) for k, v in default if not _unset(v)]  # facts leaves the unset ones out anyway
    if folded:
        shown += (f"<details class=\"defaults\"><summary>{len(folded)} more at their defaults</summary>"
                  f"{facts(folded, wide=True)}</details>")
    return "<h3>Parameters</h3>" + shown


def _library(backend: str) -> str:
    """The library a backend runs (``faststream-pubsub``: FastStream; a variant: its package's), lower case; a name the
    registry does not know (an older result's) stands for itself."""
    from taskbench import backends

    try:
        return backends.info(backend).extra.lower()
    except backends.UnknownBackendError:
        return backend.lower()


def setup(result: Result) -> str:
    """The run's parameters and every backend's library versions."""
    out = []
    if result.config:
        out.append(parameters_html(result.config))
    if result.environments:
        rows = []
        for backend, env in sorted(result.environments.items()):
            found = env.get("packages")
            packages: dict[str, str] = found if isinstance(found, dict) else {}
            library = _library(backend.split("@")[0])  # "arq@article-000": arq on a pinned set of versions
            main = [f"{k} {v}" for k, v in sorted(packages.items()) if k.lower().startswith(library)]
            every = ", ".join(f"{k} {v}" for k, v in sorted(packages.items(), key=lambda kv: kv[0].lower()))
            rows.append([f'<td class="l">{esc(backend)}</td>', f'<td class="l">{esc(env.get("python", ""))}</td>',
                         f'<td class="l">{esc(", ".join(main) or "–")}</td>',
                         f'<td class="l"><details><summary>{len(packages)} packages</summary>'
                         f'<span class="note">{esc(every)}</span></details></td>'])
        out.append("<h3>Libraries per backend</h3>" + table(
            [("backend", "l"), ("python", "l"), ("its library", "l"), ("every package", "l")], rows,
            sortable=False))
    return "\n".join(out)
