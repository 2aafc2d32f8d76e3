"""How a duration and a percentage are written on the command line: one parser each.

A duration is ``250ms``, ``30s``, ``2m``, ``1h`` or a bare number in the option's own unit: seconds, or
milliseconds for the few options whose help says ms (``--broker-delay``, ``--max-e2e-p95``). A percentage
is a bare number of percent with an optional ``%``: ``5`` and ``5%`` are the same.

:class:`Duration` and :class:`Percent` are typer parsers with their bounds (``typer.Option(parser=...)``);
a value out of them is the option's usage error. Neutral: imports nothing of taskbench.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Duration", "Percent", "format_duration", "parse_duration", "parse_percent"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|min|m|h|)\s*$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_UNIT_NAMES = {"s": "seconds", "ms": "milliseconds"}
_PERCENT = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*%?\s*$")


def parse_duration(text: str, *, unit: str = "s") -> float:
    """``text`` in ``unit`` (``s`` or ``ms``): ``90s``, ``2m``, ``1.5h``, ``250ms`` or a bare number of
    ``unit``; a ValueError in one line otherwise."""
    found = _DURATION.match(text)
    if not found:
        raise ValueError(f"expected a duration such as 30s, 2m, 1h or a number of {_UNIT_NAMES[unit]}, "
                         f"got {text!r}")
    number = float(found[1])
    return number if not found[2] else number * _SECONDS[found[2]] / _SECONDS[unit]


def parse_percent(text: str) -> float:
    """``5``, ``5%`` or ``0.5 %``: the number of percent; a ValueError in one line otherwise (nan and inf
    are no percentage)."""
    found = _PERCENT.match(text)
    if not found:
        raise ValueError(f"expected a percentage such as 5 or 5%, got {text!r}")
    return float(found[1])


def format_duration(seconds: float) -> str:
    """The shortest way to write ``seconds``: ``1h``, ``10m``, ``90s``, ``250ms``."""
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    for suffix, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{suffix}"
    return f"{seconds:g}s"


def _usage_error(message: str) -> Exception:
    import typer  # the command line's error: click names the option it belongs to

    return typer.BadParameter(message)


@dataclass(frozen=True)
class Duration:
    """A duration option's parser, its value in ``unit`` within ``[low, high]`` (in ``unit`` too)."""

    low: float
    high: float
    unit: str = "s"
    __name__ = "duration"  # typer names a parser's type after it

    def __call__(self, value: str | float) -> float:
        if isinstance(value, int | float):  # the option's default
            return float(value)
        try:
            number = parse_duration(value, unit=self.unit)
        except ValueError as exc:
            raise _usage_error(str(exc)) from None
        if not self.low <= number <= self.high:
            raise _usage_error(f"must be between {self.describe(self.low)} and {self.describe(self.high)}, "
                               f"got {value!r}")
        return number

    def describe(self, value: float) -> str:
        """``value`` (in ``unit``) as a duration: below a second in ms for an option in ms, else the shortest
        way."""
        if self.unit == "ms":
            return f"{value:g}ms" if value < 1000 else format_duration(value / 1000)
        return format_duration(value)

    def settings(self) -> dict[str, Any]:
        """A ``typer.Option``'s settings: this parser, and its range as the metavar."""
        return {"parser": self, "metavar": f"<duration {self.describe(self.low)}..{self.describe(self.high)}>"}


@dataclass(frozen=True)
class Percent:
    """A percentage option's parser: a number of percent within its bounds, ``low`` and ``high``
    themselves taken unless ``above``/``below`` says they are not."""

    low: float
    high: float
    above: bool = False  # more than ``low``, not ``low`` itself
    below: bool = False  # less than ``high``, not ``high`` itself
    __name__ = "percent"

    def __call__(self, value: str | float) -> float:
        if isinstance(value, int | float):
            return float(value)
        try:
            number = parse_percent(value)
        except ValueError as exc:
            raise _usage_error(str(exc)) from None
        low_ok = number > self.low if self.above else number >= self.low
        high_ok = number < self.high if self.below else number <= self.high
        if not (math.isfinite(number) and low_ok and high_ok):
            raise _usage_error(f"must be {self.range_text}, got {value!r}")
        return number

    @property
    def range_text(self) -> str:
        low = f"more than {self.low:g}%" if self.above else f"from {self.low:g}%"
        high = f"below {self.high:g}%" if self.below else f"at most {self.high:g}%"
        return f"{low} and {high}" if self.above else f"{low} to {high}"

    def settings(self) -> dict[str, Any]:
        """A ``typer.Option``'s settings: this parser, and its range as the metavar."""
        return {"parser": self, "metavar": f"<percent {self.low:g}..{self.high:g}>"}
