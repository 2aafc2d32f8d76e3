"""How a figure is written in every report (terminal, markdown, HTML)."""

from __future__ import annotations

from typing import Any

RATE = "rate"  # a rate's format: whole numbers, but 0.4 req/s is not 0


def fmt(value: Any, spec: str = "{:.0f}") -> str:
    """``–`` for a missing figure, yes/no for a flag, ``spec`` (or :data:`RATE`) for a number."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if spec == RATE:
        small = isinstance(value, float) and 0 < abs(value) < 9.95 and value != round(value)
        spec = "{:.1f}" if small else "{:.0f}"
    try:
        return spec.format(value)
    except (ValueError, TypeError):
        return str(value)
