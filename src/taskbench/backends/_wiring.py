"""A library's wiring on each broker it runs on, picked from a table keyed by the broker's name.

A backend never compares ``settings.broker``: it keeps one small object per broker (what the library is
told there, how its queue is counted and purged) and looks it up here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

W = TypeVar("W")


def pick(wirings: Mapping[str, W], broker: str, library: str) -> W:
    """``broker``'s wiring; a ValueError naming the brokers ``library`` runs on when it has none."""
    found = wirings.get(broker)
    if found is None:
        raise ValueError(f"{library} runs on {', '.join(wirings)}, not {broker}")
    return found
