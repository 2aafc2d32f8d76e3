"""A soak's growth fit and drift verdict on synthetic series, the downsampling bound, the latency windows."""

from __future__ import annotations

import random

import pytest

from taskbench.harness.soak.fit import fit_all, growth, theil_sen
from taskbench.harness.soak.latency import e2e_over_time
from taskbench.harness.soak.plan import SoakSpec, parse_duration
from taskbench.harness.soak.series import Downsampled

HOUR = 3600.0


def series(slope_per_h: float, *, level: float = 80.0, noise: float = 0.0, seconds: int = 1800,
           seed: int = 1) -> tuple[list[float], list[float | None]]:
    """A point every 5 s growing ``slope_per_h`` per hour around ``level`` with Gaussian noise."""
    rng = random.Random(seed)
    t = [float(s) for s in range(0, seconds, 5)]
    return t, [level + slope_per_h * s / HOUR + rng.gauss(0, noise) for s in t]


def test_theil_sen_recovers_a_slope_that_outliers_would_pull_a_least_squares_line_off() -> None:
    t = [float(i) for i in range(50)]
    y = [2.0 * x + 1 for x in t]
    for i in (45, 46, 47, 48, 49):  # a tenth of the points far off, at the end where they pull hardest
        y[i] = 1000.0
    slope, low, high = theil_sen(t, y)
    assert slope == pytest.approx(2.0)
    assert low <= slope <= high


def test_a_leak_is_judged_a_drift_and_its_slope_is_the_one_put_in() -> None:
    t, y = series(144.0, noise=1.5)  # 2 KiB a task at 20 tasks/s, with a few MB of noise
    found = growth(t, y, unit="MB", start=360, end=1800, bound=20.0, bound_text="20 MB/h")
    assert found is not None and found.drift
    assert found.low_per_h <= 144.0 <= found.high_per_h
    assert found.from_s >= 360 and found.to_s <= 1800


@pytest.mark.parametrize("seed", range(5))
def test_a_flat_noisy_series_is_not_a_drift(seed: int) -> None:
    t, y = series(0.0, noise=3.0, seed=seed)
    found = growth(t, y, unit="MB", start=360, end=1800, bound=20.0)
    assert found is not None and not found.drift


def test_growth_below_the_bound_is_not_a_drift_even_when_it_is_clear() -> None:
    t, y = series(5.0, noise=0.01)  # a real, steady 5 MB/h: below a bound of 20
    found = growth(t, y, unit="MB", start=0, end=1800, bound=20.0)
    assert found is not None and found.low_per_h > 0 and not found.drift


def test_too_few_points_fit_nothing_and_missing_samples_are_skipped() -> None:
    assert growth([0, 1, 2], [1.0, 2.0, 3.0], unit="MB", start=0, end=10) is None
    t, y = series(100.0)
    holes: list[float | None] = [None if i % 3 == 0 else v for i, v in enumerate(y)]
    found = growth(t, holes, unit="MB", start=0, end=1800)
    assert found is not None and found.points == sum(v is not None for v in holes)


def test_fit_all_judges_memory_latency_and_backlog_and_leaves_the_warm_up_and_the_drain_out() -> None:
    spec = SoakSpec(duration_s=1800)
    t, memory = series(144.0, noise=1.0)
    _, latency = series(0.0, level=30.0, noise=3.0)
    # the first 20 % climbs (a warm-up: caches filling), after the load's end the backlog empties
    memory = [v + (100 - s / 3.6) if s < 360 else v for s, v in zip(t, memory, strict=True)]
    backlog: list[float | None] = [5.0 if s <= 1500 else 0.0 for s in t]
    fitted, drift = fit_all(spec, t, {"tasks_mb": memory, "e2e_p95_ms": latency, "backlog": backlog,
                                      "broker_keys": [float(s) for s in t]},
                            {"tasks_mb": "MB", "e2e_p95_ms": "ms", "backlog": "tasks", "broker_keys": "keys"},
                            load_s=1500, rate=20)
    assert fitted["tasks_mb"].drift and not fitted["e2e_p95_ms"].drift and not fitted["backlog"].drift
    assert fitted["tasks_mb"].from_s >= 0.2 * 1500 and fitted["tasks_mb"].to_s <= 1500
    assert fitted["broker_keys"].bound_per_h is None and not fitted["broker_keys"].drift  # shown, not judged
    assert len(drift) == 1 and "the task processes' memory grows" in drift[0] and "beyond 20 MB/h" in drift[0]
    # a latency that doubles every half hour from 30 ms is beyond 50 % of its level per hour
    _, growing = series(60.0, level=30.0, noise=1.0)
    fitted, drift = fit_all(spec, t, {"e2e_p95_ms": growing}, {"e2e_p95_ms": "ms"}, load_s=1800, rate=20)
    assert fitted["e2e_p95_ms"].drift and "end-to-end p95" in drift[0]


@pytest.mark.parametrize("samples", [10, 719, 720, 721, 5_000, 21_600])
def test_downsampling_keeps_at_most_max_points_and_each_point_is_the_mean_of_its_samples(samples: int) -> None:
    kept = Downsampled(max_points=720)
    for s in range(samples):
        kept.add(float(s), {"v": float(s), "half": float(s) if s % 2 else None})
    t, values = kept.points()
    assert len(t) <= 720 + 1  # the full points and the one being filled
    assert len(values["v"]) == len(t) and t == sorted(t)
    # the mean of 0..n-1 is kept whatever was merged: every point weighs the samples it holds
    assert all(v is not None and abs(v - ts) < 1e-9 for v, ts in zip(values["v"], t, strict=True))
    assert kept.resolution * 720 >= samples / 2 or samples < 720


def test_a_series_that_starts_later_has_no_value_before_it() -> None:
    kept = Downsampled(max_points=8)
    kept.add(0.0, {"a": 1.0})
    kept.add(1.0, {"a": 1.0, "b": 2.0})
    t, values = kept.points()
    assert values["b"] == [None, 2.0] and len(t) == 2


def test_e2e_over_time_puts_each_task_in_the_window_of_its_finish() -> None:
    t0 = 1000.0
    times = {f"{i}": (t0 + i, t0 + i, t0 + i + 0.1) for i in range(100)}  # 100 ms each, one per second
    times |= {f"slow{i}": (t0 + 80, t0 + 80, t0 + 80.5) for i in range(10)}  # 500 ms, all finishing at 80.5 s
    times["w1"] = (t0, t0, t0 + 50)  # the warm-up's: left out
    got = e2e_over_time([10.0, 30.0, 50.0, 70.0, 90.0], times, t0=t0, skip_prefix="w")
    assert got["e2e_p50_ms"][0] == pytest.approx(100, abs=1)
    assert got["e2e_p95_ms"][4] == pytest.approx(500, abs=1)  # 80.5 s is nearer 90 than 70
    assert got["e2e_p95_ms"][2] == pytest.approx(100, abs=1)


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("90s", 90), ("1.5h", 5400), ("600", 600)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5", "25h", "-3m", "3d"])
def test_a_duration_out_of_range_or_unreadable_is_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="--soak"):
        parse_duration(text)
