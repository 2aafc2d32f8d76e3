"""HDR-style log-linear latency histogram with sparse storage.

Values are non-negative integers (microseconds). Values below 128 are stored
exactly; above that each power of two is split into 64 linear sub-buckets, so a
bucket is at most 1/64 of its lower bound wide and its midpoint is within
1/128 (< 0.8 %) of any value in it. Storage is a dict ``key -> count``, so an
idle histogram costs nothing and merging two is a dict walk.
"""

from __future__ import annotations

import math
from typing import Any

# 7 bits of precision: keys 0..127 are exact values; above that the top 7 bits
# of the value (64..127) are kept together with the shift.
_BITS = 7
_SUB = 1 << _BITS  # 128


def _key(value: int) -> int:
    shift = value.bit_length() - _BITS
    if shift <= 0:
        return value
    return shift * _SUB + (value >> shift)


def _bounds(key: int) -> tuple[int, int]:
    """Inclusive [low, high] of values that map to ``key``."""
    shift, mantissa = divmod(key, _SUB)
    low = mantissa << shift
    return low, low + (1 << shift) - 1


class Histogram:
    """Log-linear histogram of integer microsecond values (≤ 1 % relative error)."""

    __slots__ = ("_buckets", "count", "max", "min", "total")

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    def record(self, value_us: int, count: int = 1) -> None:
        """Add ``count`` observations of ``value_us`` (negative values clamp to 0)."""
        if count <= 0:
            return
        v = int(value_us)
        if v < 0:
            v = 0
        k = _key(v)
        b = self._buckets
        b[k] = b.get(k, 0) + count
        if self.count == 0:
            self.min = self.max = v
        elif v < self.min:
            self.min = v
        elif v > self.max:
            self.max = v
        self.count += count
        self.total += v * count

    def merge(self, other: Histogram) -> Histogram:
        """Add all observations of ``other`` into this histogram; returns self."""
        if other.count == 0:
            return self
        b = self._buckets
        for k, c in other._buckets.items():
            b[k] = b.get(k, 0) + c
        if self.count == 0:
            self.min, self.max = other.min, other.max
        else:
            self.min = min(self.min, other.min)
            self.max = max(self.max, other.max)
        self.count += other.count
        self.total += other.total
        return self

    @property
    def mean(self) -> float:
        """Exact arithmetic mean (the running sum is kept exactly)."""
        return self.total / self.count if self.count else 0.0

    def percentile(self, q: float) -> int:
        """Value at percentile ``q`` (0..100): the ``ceil(q% * count)``-th smallest.

        Returns the midpoint of the containing bucket, clamped to [min, max], so
        p0 is the exact minimum and p100 the exact maximum.
        """
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile must be in [0, 100], got {q}")
        if self.count == 0:
            return 0
        rank = max(1, math.ceil(q / 100.0 * self.count))
        seen = 0
        for k in sorted(self._buckets):
            seen += self._buckets[k]
            if seen >= rank:
                low, high = _bounds(k)
                return min(max((low + high) // 2, self.min), self.max)
        return self.max

    def summary(self) -> dict[str, float]:
        """Common percentiles in milliseconds, plus mean and count."""
        ms = 1000.0
        return {
            "p50": self.percentile(50) / ms,
            "p90": self.percentile(90) / ms,
            "p95": self.percentile(95) / ms,
            "p99": self.percentile(99) / ms,
            "p99_9": self.percentile(99.9) / ms,
            "max": self.max / ms,
            "mean": self.mean / ms,
            "count": float(self.count),
        }

    def buckets(self) -> list[tuple[int, int, int]]:
        """``(low, high, count)`` of every non-empty bucket, by value (inclusive bounds, µs)."""
        return [(*_bounds(k), c) for k, c in sorted(self._buckets.items())]

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; buckets as ``[[key, count], ...]`` sorted by key."""
        return {
            "buckets": [[k, c] for k, c in sorted(self._buckets.items())],
            "count": self.count,
            "total": self.total,
            "min": self.min,
            "max": self.max,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Histogram:
        """Inverse of :meth:`to_dict`."""
        h = cls()
        h._buckets = {int(k): int(c) for k, c in data.get("buckets", [])}
        h.count = int(data.get("count", 0))
        h.total = int(data.get("total", 0))
        h.min = int(data.get("min", 0))
        h.max = int(data.get("max", 0))
        return h

    def __repr__(self) -> str:
        return f"Histogram(count={self.count}, min={self.min}, max={self.max})"
