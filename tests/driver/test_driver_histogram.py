"""Histogram accuracy against exact percentiles of sorted random data."""

from __future__ import annotations

import json
import math
import random

import pytest

from taskbench.histogram import Histogram


def _exact(sorted_values: list[int], q: float) -> int:
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_within_one_percent(seed: int) -> None:
    rng = random.Random(seed)
    # Log-uniform over 1 µs .. 100 s covers the exact and the log-linear ranges.
    values = [int(math.exp(rng.uniform(0, math.log(100e6)))) for _ in range(20_000)]
    h = Histogram()
    for v in values:
        h.record(v)
    values.sort()
    for q in (0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100):
        exact = _exact(values, q)
        got = h.percentile(q)
        assert abs(got - exact) <= max(0.01 * exact, 0), (q, exact, got)
    assert h.count == len(values)
    assert h.min == values[0]
    assert h.max == values[-1]
    assert h.mean == pytest.approx(sum(values) / len(values))


def test_small_values_are_exact() -> None:
    h = Histogram()
    for v in range(128):
        h.record(v)
    assert [h.percentile(100 * (i + 1) / 128) for i in range(128)] == list(range(128))


def test_merge_equals_recording_everything() -> None:
    rng = random.Random(7)
    a, b, both = Histogram(), Histogram(), Histogram()
    for i in range(5000):
        v = rng.randint(0, 5_000_000)
        (a if i % 2 else b).record(v)
        both.record(v)
    a.merge(b)
    assert a.to_dict() == both.to_dict()
    assert a.merge(Histogram()).count == both.count
    assert Histogram().merge(a).to_dict() == both.to_dict()


def test_record_count_and_negative_clamp() -> None:
    h = Histogram()
    h.record(1000, count=9)
    h.record(-5)
    assert h.count == 10
    assert h.min == 0
    assert h.percentile(50) == pytest.approx(1000, rel=0.01)


def test_summary_in_ms_and_json_roundtrip() -> None:
    h = Histogram()
    for v in range(1, 10_001):
        h.record(v * 100)  # 0.1 ms .. 1000 ms
    s = h.summary()
    assert set(s) == {"p50", "p90", "p95", "p99", "p99_9", "max", "mean", "count"}
    assert s["p50"] == pytest.approx(500.0, rel=0.01)
    assert s["p99"] == pytest.approx(990.0, rel=0.01)
    assert s["max"] == 1000.0
    assert s["count"] == 10_000
    back = Histogram.from_dict(json.loads(json.dumps(h.to_dict())))
    assert back.summary() == s


def test_empty_and_bad_percentile() -> None:
    h = Histogram()
    assert h.percentile(99) == 0
    assert h.mean == 0.0
    with pytest.raises(ValueError, match="percentile"):
        h.percentile(101)
