"""What a ledger row must be: the two hashes' content sorted into valid rows and corrupt ones.

A count that is not a positive integer, a time row that is not three finite, plausible unix times, a
key that is not a task id, or a row of one hash without its row in the other is *corrupt*; nothing
here raises on content (see :mod:`taskbench.ledger`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from taskbench.messages import TASK_ID_PATTERN

#: a plausible time (unix seconds): beyond it a row is corrupt, and µs differences stay far from overflow
LATEST_TIME: Final = 1e11
_TASK_ID = re.compile(TASK_ID_PATTERN)


@dataclass(kw_only=True)
class Rows:
    """The ledger's content: valid counts and times by task id, and what is wrong with the rest."""

    counts: dict[str, int] = field(default_factory=dict)
    times: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    corrupt: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class Outcomes:
    """What the ledger holds of a user's task beyond counts and times (:meth:`Ledger.outcomes`)."""

    #: task id -> (failed executions, the last exception type)
    failed: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: task id -> CPU seconds of its last execution
    cpu_s: dict[str, float] = field(default_factory=dict)
    #: task id -> when its last execution started (unix seconds), finished or not
    started: dict[str, float] = field(default_factory=dict)


def sort_rows(raw_counts: Mapping[Any, Any], raw_times: Mapping[Any, Any]) -> Rows:
    """Valid rows and corrupt ones from two hashes' content as read (bytes or str), or as built in
    Python (ints, tuples of floats). An id is corrupt when its count or its times are malformed,
    when it is not a task id, or when one hash has a row for it and the other has not."""
    out = Rows()
    counts: dict[str, int] = {}
    times: dict[str, tuple[float, float, float]] = {}
    for key, value in raw_counts.items():
        task_id, problem = _task_id(key)
        count = _count(value)
        if problem is None and count is None:
            problem = f"count {_show(value)} is not a positive integer"
        if problem is not None:
            out.corrupt[task_id] = problem
        elif count is not None:
            counts[task_id] = count
    for key, value in raw_times.items():
        task_id, problem = _task_id(key)
        row = _times_row(value)
        if problem is None and row is None:
            problem = f"times {_show(value)} are not three finite unix times"
        if problem is not None:
            out.corrupt.setdefault(task_id, problem)
        elif row is not None:
            times[task_id] = row
    for task_id in counts.keys() - times.keys() - out.corrupt.keys():
        out.corrupt[task_id] = "a count without times"
    for task_id in times.keys() - counts.keys() - out.corrupt.keys():
        out.corrupt[task_id] = "times without a count"
    out.counts = {t: n for t, n in counts.items() if t not in out.corrupt}
    out.times = {t: row for t, row in times.items() if t not in out.corrupt}
    return out


def _show(value: Any) -> str:
    text = repr(value.decode(errors="replace") if isinstance(value, bytes) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _task_id(key: Any) -> tuple[str, str | None]:
    """The id as text, and what is wrong with it (None: it is a task id)."""
    if isinstance(key, bytes):
        try:
            text = key.decode()
        except UnicodeDecodeError:
            return key.decode(errors="replace")[:64], "key is not UTF-8"
    else:
        text = str(key)
    if not _TASK_ID.match(text):
        return text[:64], "key is not a task id"
    return text, None


def _count(value: Any) -> int | None:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, str):
        value = int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


def _times_row(value: Any) -> tuple[float, float, float] | None:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    parts = value.split() if isinstance(value, str) else value
    if not isinstance(parts, list | tuple) or len(parts) != 3:
        return None
    row: list[float] = []
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, str | int | float):
            return None
        try:
            number = float(part)
        except (ValueError, OverflowError):
            return None
        if not (math.isfinite(number) and 0.0 <= number <= LATEST_TIME):
            return None
        row.append(number)
    return row[0], row[1], row[2]
