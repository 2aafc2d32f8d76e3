"""Series at bounded resolution: at most ``max_points`` points however long the run.

Samples come every ``interval`` seconds; a point is the mean of ``stride`` consecutive samples. When the
points reach ``max_points``, each pair is merged into one (the mean of their samples) and ``stride``
doubles, so a series holds between ``max_points / 2`` and ``max_points`` full points (plus the partial one
being filled) at any length: 720 points are 1 s apart for 12 min, 32 s apart after 6 h. A mean, not a
pick, so a point is the level of its whole window (a leak's slope is unchanged; a spike is averaged in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def _mean(values: Iterable[float | None], weights: Iterable[int]) -> float | None:
    total = weight = 0.0
    for value, w in zip(values, weights, strict=True):
        if value is not None:
            total += value * w
            weight += w
    return None if weight == 0 else total / weight


class Downsampled:
    """Named series sampled together (one time axis), kept at most ``max_points`` points each."""

    def __init__(self, max_points: int = 720, interval: float = 1.0) -> None:
        if max_points < 2 or max_points % 2:
            raise ValueError("max_points must be an even number >= 2")
        self.max_points = max_points
        self.interval = interval
        self.stride = 1  # samples per point
        self.names: list[str] = []
        self._t: list[float] = []
        self._values: dict[str, list[float | None]] = {}
        self._weights: list[int] = []  # samples merged into each point
        self._pending: list[tuple[float, Mapping[str, float | None]]] = []

    def add(self, t: float, values: Mapping[str, float | None]) -> None:
        """One sample at ``t`` seconds; a name not given (or None) is a missing sample."""
        for name in values:
            if name not in self._values:
                self.names.append(name)
                self._values[name] = [None] * len(self._t)
        self._pending.append((t, values))
        if len(self._pending) >= self.stride:
            self._flush()
            if len(self._t) >= self.max_points:
                self._halve()

    def _flush(self) -> None:
        if not self._pending:
            return
        ones = [1] * len(self._pending)
        self._t.append(sum(t for t, _ in self._pending) / len(self._pending))
        for name, column in self._values.items():
            column.append(_mean((values.get(name) for _, values in self._pending), ones))
        self._weights.append(len(self._pending))
        self._pending = []

    def _halve(self) -> None:
        pairs = range(0, len(self._t) - 1, 2)
        w = self._weights
        self._t = [(self._t[i] * w[i] + self._t[i + 1] * w[i + 1]) / (w[i] + w[i + 1]) for i in pairs]
        for name, column in self._values.items():
            self._values[name] = [_mean(column[i:i + 2], w[i:i + 2]) for i in pairs]
        self._weights = [w[i] + w[i + 1] for i in pairs]
        self.stride *= 2

    @property
    def resolution(self) -> float:
        """Seconds a full point spans now."""
        return self.interval * self.stride

    def points(self) -> tuple[list[float], dict[str, list[float | None]]]:
        """The time axis and every series, the samples not yet a full point included as a last point."""
        t = list(self._t)
        values = {name: list(column) for name, column in self._values.items()}
        if self._pending:
            ones = [1] * len(self._pending)
            t.append(sum(s for s, _ in self._pending) / len(self._pending))
            for name in values:
                values[name].append(_mean((v.get(name) for _, v in self._pending), ones))
        return t, values
