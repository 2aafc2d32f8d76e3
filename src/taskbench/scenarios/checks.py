"""A scenario file's checks: each table, value and figure against the schema, a mistake named with its line."""

from __future__ import annotations

import math
import re
import string
from pathlib import Path
from typing import Any

from taskbench import params as schema
from taskbench.harness.processes.cgroups import Limit

COMPONENTS = {"queue": ("api", "workers"), "http": ("server",), "celery": ("workers",)}
FIGURES = {
    "rps": float, "peak_rps": float, "p50_ms": float, "p95_ms": float, "time_to_run_all_s": float,
    "errors_pct": float,
    "tasks_per_s": float, "elapsed_s": float, "concurrency": float, "note": str,
}

#: a label's field: a parameter's name
_FIELD = re.compile(r"[a-z_][a-z0-9_]*")

# kind -> parameter name -> its declaration (type, default, bounds or choices, help) in the schema
PARAMETERS: dict[str, dict[str, schema.Param]] = {kind: schema.for_kind(kind) for kind in schema.KINDS}


class ScenarioError(ValueError):
    """A broken scenario file: the message names the file and the line."""


class _Lines:
    """Finds the line of a key in a table of the file (good enough for the files we write)."""

    _header = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    _key = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")

    def __init__(self, text: str) -> None:
        self.entries: list[tuple[str, int, str, int]] = []  # (table, nth, key, line)
        table, counts, nth = "", dict[str, int](), 0
        for number, line in enumerate(text.splitlines(), start=1):
            header = self._header.match(line)
            if header:
                table = header.group(2).replace('"', "").replace(" ", "")
                counts[table] = counts.get(table, 0) + 1
                nth = counts[table] - 1
                self.entries.append((table, nth, "", number))
                continue
            key = self._key.match(line)
            if key:
                self.entries.append((table, nth, key.group(1).strip("\"'"), number))

    def find(self, table: str, key: str = "", nth: int = 0) -> int | None:
        line = self._exact(table, key, nth)
        if line is None and key:  # an inline table (`limits.x = {...}`) or a dotted key: the table's line
            return self._exact(table, "", nth) if table else None
        return line

    def _exact(self, table: str, key: str, nth: int) -> int | None:
        table = table.replace('"', "").replace(" ", "")  # as the headers are stored
        return next((line for t, n, k, line in self.entries if t == table and n == nth and k == key), None)

    def locate(self, table: str, path: list[str], nth: int = 0) -> int | None:
        """The line of the deepest part of ``path`` (keys under ``table``) that the file writes: a dotted key
        (``options.saq.retries = 3``), a key under a header of its own (``[options.saq]``), an inline table."""
        prefix = table.split(".") if table else []
        full = [*prefix, *path]
        for end in range(len(full), len(prefix), -1):
            for split in range(len(prefix), end + 1):  # split == end: a header of its own (``[options.saq]``)
                line = self._exact(".".join(full[:split]), ".".join(full[split:end]),
                                   nth if split == len(prefix) else 0)
                if line is not None:
                    return line
        return self.find(table, "", nth) if table else None


class Checker:
    """The checks a scenario's builder runs on the file's parsed tables; each failure names its line."""

    def __init__(self, path: Path, text: str, data: dict[str, Any]) -> None:
        self.path, self.data, self.lines = path, data, _Lines(text)

    def fail(self, message: str, table: str = "", key: str = "", nth: int = 0) -> ScenarioError:
        line = self.lines.find(table, key, nth)
        where = f"{self.path}:{line}" if line else str(self.path)
        return ScenarioError(f"{where}: {message}")

    def check_finite(self) -> None:
        """Every number of the file finite, wherever it is (a parameter, a limit, a phase, a figure, a
        library's setting): TOML writes ``nan``, ``inf`` and ``-inf``, and ``1e999`` reads as infinity.
        A NaN passes every bound (each comparison with it is false), so it is refused here, once."""
        todo: list[tuple[Any, str, int, list[str]]] = [(self.data, "", 0, [])]
        while todo:
            value, table, nth, keys = todo.pop()
            if isinstance(value, float) and not math.isfinite(value):
                line = self.lines.locate(table, keys, nth) or self.lines.locate("", keys)
                where = f"{self.path}:{line}" if line else str(self.path)
                name = ".".join(part for part in (table, *keys) if part)
                raise ScenarioError(f"{where}: {name} must be a finite number, got {value}")
            if isinstance(value, dict):
                todo.extend((v, table, nth, [*keys, str(k)]) for k, v in value.items())
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, dict) and keys:  # an array of tables: [[case]], [[phases]]
                        todo.append((item, ".".join(part for part in (table, *keys) if part), i, []))
                    else:
                        todo.append((item, table, nth, keys))

    def _table(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            raise self.fail(f"{name!r} must be a table ([{name}])", "", name)
        return value

    def _limits(self, kind: str) -> dict[str, dict[str, Limit]]:
        out: dict[str, dict[str, Limit]] = {}
        for name, components in self._table("limits").items():
            table = f"limits.{name}"
            if not isinstance(components, dict):
                raise self.fail(f"limit set {name!r} must be a table", "limits", name)
            out[name] = {}
            for component, values in components.items():
                if component not in COMPONENTS[kind]:
                    raise self.fail(f"unknown component {component!r} for a {kind} scenario; known: "
                                    f"{', '.join(COMPONENTS[kind])}", table, component)
                if not isinstance(values, dict) or set(values) - {"cpu", "memory_mb"}:
                    raise self.fail(f"limits of {component!r} take cpu and memory_mb only", table, component)
                try:
                    out[name][component] = Limit(cpu=_num(values.get("cpu")),
                                                 memory_mb=_int(values.get("memory_mb")))
                except (TypeError, ValueError) as exc:
                    raise self.fail(str(exc), table, component) from None
        return out

    def _check(self, kind: str, key: str, value: Any, limit_sets: dict[str, Any], table: str,
               line_key: str, nth: int = 0) -> None:
        params = PARAMETERS[kind]
        if key not in params:
            raise self.fail(f"unknown parameter {key!r} for a {kind} scenario; known: "
                            f"{', '.join(sorted(params))}", table, line_key, nth)
        if key == "backend" and isinstance(value, dict):
            raise self.fail("a backend selector ({ broker = ... }) chooses a [[matrix]] block's backends; "
                            "name one backend here", table, line_key, nth)
        problem = params[key].problem(value)
        if problem:
            raise self.fail(problem, table, line_key, nth)
        if key == "label" and "{" in value:  # a label without a field is its text (the builder fills no other)
            try:
                label_fields(value)
            except ValueError as exc:
                raise self.fail(f"label {_cut(repr(value))}: {exc}", table, line_key, nth) from None
        if key == "limits" and value not in limit_sets:
            raise self.fail(f"no limit set {value!r}; defined: {', '.join(limit_sets) or 'none'}",
                            table, line_key, nth)
        if key == "options":
            found = _options_problem(value)
            if found:
                message, path = found
                line = self.lines.locate(table, [line_key, *path] if line_key == "options" else [line_key], nth)
                raise ScenarioError(f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}")
        if key == "backend":
            from taskbench import backends

            try:
                backends.info(value)
            except ValueError as exc:
                raise self.fail(str(exc), table, line_key, nth) from None
        if key == "fault":
            from taskbench.harness.faults.kinds import Fault

            try:
                Fault.parse(value)
            except ValueError as exc:
                raise self.fail(str(exc).removeprefix("--fault: "), table, line_key, nth) from None
        if key == "workload":
            from taskbench.messages import WORKLOADS

            if value not in WORKLOADS:
                raise self.fail(f"unknown workload {value!r}; known: {', '.join(WORKLOADS)}",
                                table, line_key, nth)

    def _check_row(self, kind: str, row: Any, nth: int, limit_sets: dict[str, Any]) -> None:
        if not isinstance(row, dict) or not isinstance(row.get("match"), dict):
            raise self.fail("each [[article.rows]] needs a match = { ... } table", "article.rows", "", nth)
        for key, value in row["match"].items():
            self._check(kind, key, value, limit_sets, "article.rows", "match", nth)
        for key, value in row.items():
            if key == "match":
                continue
            if key not in FIGURES:
                raise self.fail(f"unknown figure {key!r}; known: {', '.join(FIGURES)}", "article.rows", key, nth)
            want = FIGURES[key]
            if not (isinstance(value, want) or (want is float and isinstance(value, int))) or isinstance(value, bool):
                raise self.fail(f"{key} must be {want.__name__}, got {value!r}", "article.rows", key, nth)

    def _required(self, kind: str, params: dict[str, Any], *, phased: bool = False) -> None:
        need = {"queue": ("backend", "workload"), "http": ("endpoint",), "celery": ("pool", "test")}[kind]
        for key in need:
            if key not in params:
                raise self.fail(f"a case has no {key!r}: give it in [defaults], [matrix] or [[case]]")
        if phased:
            for key in ("requests", "duration", "rate"):
                if key in params:
                    raise self.fail(f"the [[phases]] set every case's rate and length: leave out {key!r}")
            return
        if kind in ("queue", "http") and "requests" not in params and "duration" not in params:
            raise self.fail("a case has neither 'requests' nor 'duration': every load must be bounded")
        if params.get("model") == "open" and "rate" not in params:
            raise self.fail("the open model needs 'rate'")


def label_fields(template: str) -> list[tuple[str, str | None]]:
    """A label template as (text, field name or None) pieces; ``{{`` and ``}}`` are braces.

    A field is a parameter's name and nothing else: a format spec (``{backend:>299999999}`` would pad to
    300 MB), an attribute or an index (``{backend.__class__}``), a conversion (``!r``) or a positional
    field (``{0}``, ``{}``) is a ValueError, so a label never runs str.format on a file's text."""
    pieces: list[tuple[str, str | None]] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:  # a lone { or }
        raise ValueError(f"{exc}; write {{{{ and }}}} for a brace") from None
    for text, name, spec, conversion in parsed:
        if name is None:
            pieces.append((text, None))
            continue
        written = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if not _FIELD.fullmatch(name) or spec or conversion:
            raise ValueError(f"{_cut(written)} is no field: a field is a parameter's name, such as {{backend}}, "
                             "with no format, attribute, index or conversion")
        pieces.append((text, name))
    return pieces


def _cut(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _num(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"cpu must be a number, got {value!r}")
    return float(value)


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"memory_mb must be an integer, got {value!r}")
    return value


def _options_problem(value: dict[str, Any]) -> tuple[str, list[str]] | None:
    """What is wrong with a case's ``options`` (None: nothing) and the keys it is under (``[LIB, KEY]``):
    each library's model checks its own settings."""
    from taskbench import backends
    from taskbench.backends import options

    known = backends.libraries()
    for library, values in value.items():
        if library not in known:
            return (f"options.{library}: no library {library!r} takes settings; those that do: "
                    f"{', '.join(sorted(known))}", [library])
        if not isinstance(values, dict):
            return f"options.{library} must be a table of settings ([options.{library}] KEY = VALUE)", [library]
        problem = options.problem(library, known[library], values)
        if problem:
            return f"options.{problem}", [library, *_bad_key(known[library], values)]
    return None


def _bad_key(model: type[Any], values: dict[str, Any]) -> list[str]:
    """The setting the model refuses: one it does not have, else the first whose value it refuses alone."""
    from pydantic import ValidationError

    for key in values:
        if key not in model.model_fields:
            return [key]
    for key, value in values.items():
        try:
            model.model_validate({key: value})
        except ValidationError:
            return [key]
    return []
