"""Reading result files of every schema: older ones are converted, then validated as :class:`Result`.

Schema 1 (until this module existed) wrote the same facts as plain dicts: a top-level ``schema``, a
case's repeat spread as ``runs`` / ``<figure>_min`` / ``<figure>_max`` in its summary, a celery
case's worker command lines as ``workers``, and bookkeeping fields in limit records.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from taskbench import inputs
from taskbench.results.cases import SCHEMA_VERSION, Result
from taskbench.results.model import FIGURES_CHECKED

#: the figure a repeated case is ranked by (its median run is the row), per case kind
RANKED_BY = {"queue": "rps", "http": "rps", "celery": "tasks_per_s", "overhead": "rps"}


class ResultFormatError(ValueError):
    """A file that is not a taskbench result this version can read: one line, naming the file."""


#: deeper than this, a result is not one taskbench wrote (its deepest path is about 8 levels)
MAX_DEPTH = 32
#: larger than this, a result is not one taskbench wrote (a day's soak writes a few MB)
MAX_BYTES = 64 * 1024 * 1024


def load(path: Path) -> Result:
    """Read, upgrade and validate a result file; anything wrong with it is one :class:`ResultFormatError`
    naming the file (never a traceback: not UTF-8, nested too deep, an impossible figure)."""
    try:
        raw = inputs.read_bytes(path, MAX_BYTES)
    except inputs.InputError as exc:
        raise ResultFormatError(f"cannot read {path}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultFormatError(f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFormatError(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise ResultFormatError(f"{path} is not a taskbench result (JSON nested too deep)") from None
    try:
        return parse(data)
    except ResultFormatError as exc:
        raise ResultFormatError(f"{path}: {exc}") from None


def parse(data: Any) -> Result:
    """A result of any known schema, as the current model.

    Figures are checked as well as typed: a number that is not finite (``NaN``, ``Infinity``, ``1e999``)
    anywhere, or a negative count, rate, latency or duration, is an error naming the field, so a
    hand-edited file cannot make ``report`` show, or ``compare`` pass, what no run can measure.
    """
    if not isinstance(data, dict):
        raise ResultFormatError("not a taskbench result (not a JSON object)")
    _check_numbers(data)
    version = data.get("schema_version", data.get("schema"))
    if version is None:
        raise ResultFormatError("not a taskbench result (no schema version)")
    # a bool is an int to Python: `true` would read as schema 1
    if type(version) is not int or version < 1:
        raise ResultFormatError(f"not a taskbench result (schema version {_shown(version)}: a whole number "
                                f"from 1 to {SCHEMA_VERSION} is needed)")
    if version > SCHEMA_VERSION:
        raise ResultFormatError(f"written by a newer taskbench (schema {version}); this one reads "
                                f"schemas 1 to {SCHEMA_VERSION}")
    if version == 1:
        data = upgrade_v1(data)
    try:
        return Result.model_validate(data, context={FIGURES_CHECKED: True})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ResultFormatError(f"not a valid taskbench result: {where}: {first['msg'].removeprefix('Value error, ')} "
                                f"({exc.error_count()} problem(s))") from None


def _shown(value: Any) -> str:
    """A value of the file in an error: as JSON spells it, cut short."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_numbers(data: Any) -> None:
    """Every number finite, and the data no deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    todo: list[tuple[Any, str, int]] = [(data, "", 0)]
    while todo:
        value, where, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise ResultFormatError(f"not a taskbench result (nested deeper than {MAX_DEPTH} levels at "
                                    f"{where[:80]})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ResultFormatError(f"{where}: not a finite number ({value})")
        if isinstance(value, dict):
            todo.extend((v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, f"{where}.{i}" if where else str(i), depth + 1) for i, v in enumerate(value))


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2, without losing a figure."""
    out = {k: v for k, v in data.items() if k != "schema"}
    out["schema_version"] = 2
    scenario = data.get("scenario")
    out["kind"] = "scenario" if scenario else "run"
    kind = scenario.get("kind", "queue") if isinstance(scenario, dict) else "queue"
    out["cases"] = [_case_v1(case, kind) for case in data.get("cases", [])]
    return out


def _case_v1(case: dict[str, Any], kind: str) -> dict[str, Any]:
    out = dict(case)
    out["kind"] = kind
    if kind == "celery" and isinstance(out.get("workers"), list):
        out["worker_argv"] = out.pop("workers")
    out["summary"] = _summary_v1(out.get("summary") or {}, kind)
    out["repeats"] = [{"summary": _summary_v1(r.get("summary") or {}, kind), "status": r.get("status", "failed")}
                      for r in out.get("repeats") or []]
    for key in ("limits", "fault_limits"):
        if isinstance(out.get(key), dict):
            out[key] = {name: _limit_v1(record) for name, record in out[key].items()}
    if isinstance(out.get("load"), dict):
        load = {k: v for k, v in out["load"].items() if k not in ("accepted_ids", "failed_ids")}
        out["load"] = load
    return out


def _summary_v1(summary: dict[str, Any], kind: str) -> dict[str, Any]:
    out = dict(summary)
    figure = RANKED_BY[kind]
    runs = out.pop("runs", None)
    low, high = out.pop(f"{figure}_min", None), out.pop(f"{figure}_max", None)
    if runs and low is not None and high is not None:
        out["spread"] = {"runs": runs, "figure": figure, "min": low, "max": high}
    return out


def _limit_v1(record: dict[str, Any]) -> dict[str, Any]:
    # bookkeeping of the run that wrote it, not results
    return {k: v for k, v in record.items() if k not in ("cpu_at_start", "applied_at", "cpu_at_load_start")}
