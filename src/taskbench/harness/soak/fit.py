"""The growth of a series (a Theil–Sen slope with Sen's confidence interval) and the drift verdict.

Why Theil–Sen: the slope is the median of the slopes between every pair of points, so up to 29 % of the
points can be anything (a GC pause, a burst of retries, a worker restarted and warming up again) without
moving it, where a least-squares line follows them; and it needs no assumption on the noise. Sen's
interval comes from the ranks of the same slopes (Gilbert 1987, 16.5); it assumes independent points,
which a series sampled every few seconds is not quite, so it is read as "is the slope clearly away from
zero", never as a precise figure. A series drifts when its slope is beyond the bound **and** the interval's
lower end is above zero: growth that is both large and real.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from taskbench.harness.soak.plan import SoakSpec
from taskbench.results.soak import Growth

#: fewer points than this fit nothing: no slope is shown
MIN_POINTS = 6
_Z95 = 1.959964


def theil_sen(t: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """The median slope of every pair of points (t distinct) and its 95 % interval: (slope, low, high)."""
    slopes = sorted((y[j] - y[i]) / (t[j] - t[i])
                    for i in range(len(t)) for j in range(i + 1, len(t)) if t[j] != t[i])
    if not slopes:
        raise ValueError("theil_sen needs two points at different times")
    count = len(slopes)
    middle = count // 2
    slope = slopes[middle] if count % 2 else (slopes[middle - 1] + slopes[middle]) / 2
    n = len(t)
    spread = _Z95 * math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    lower = max(0, min(count - 1, math.floor((count - spread) / 2) - 1))  # the M1-th slope, 1-based
    upper = max(0, min(count - 1, math.ceil((count + spread) / 2)))  # the (M2 + 1)-th
    return slope, slopes[lower], slopes[upper]


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def growth(t_s: Sequence[float], values: Sequence[float | None], *, unit: str, start: float, end: float,
           bound: float | None = None, bound_text: str = "") -> Growth | None:
    """The growth per hour of ``values`` over ``start``..``end`` seconds (None: too few points there)."""
    points = [(t, v) for t, v in zip(t_s, values, strict=True) if v is not None and start <= t <= end]
    if len(points) < MIN_POINTS:
        return None
    hours = [t / 3600 for t, _ in points]
    ys = [v for _, v in points]
    try:
        slope, low, high = theil_sen(hours, ys)
    except ValueError:
        return None
    drift = bound is not None and slope > bound and low > 0
    return Growth(unit=unit, slope_per_h=round(slope, 4), low_per_h=round(low, 4), high_per_h=round(high, 4),
                  level=round(median(ys), 4), from_s=round(points[0][0], 1), to_s=round(points[-1][0], 1),
                  points=len(points), bound_per_h=bound, bound_text=bound_text, drift=drift)


def bounds(spec: SoakSpec, name: str, level: float, rate: float) -> tuple[float | None, str]:
    """The bound of series ``name`` (per hour) and how it was made; (None, "") for a series only shown."""
    if name == "tasks_mb":
        return spec.memory_mb_per_h, f"{spec.memory_mb_per_h:g} MB/h"
    if name == "e2e_p95_ms":
        share = spec.latency_share_per_h
        bound = max(share * level, spec.latency_floor_ms_per_h)
        return bound, (f"{100 * share:g} % of its level {level:.1f} ms per hour, at least "
                       f"{spec.latency_floor_ms_per_h:g} ms/h")
    if name == "backlog":
        bound = max(spec.backlog_share_per_h * rate * 3600, spec.backlog_floor_per_h)
        return bound, (f"{100 * spec.backlog_share_per_h:g} % of the {rate:g}/s offered per hour, at least "
                       f"{spec.backlog_floor_per_h:g} tasks/h")
    return None, ""


#: what each judged or shown series is called in a verdict's line
LABELS = {
    "tasks_mb": "the task processes' memory", "e2e_p95_ms": "the end-to-end p95", "backlog": "the backlog",
    "e2e_p50_ms": "the end-to-end median", "broker_mb": "the broker's memory", "broker_keys": "the broker's keys",
}


def fit_all(spec: SoakSpec, t_s: Sequence[float], series: dict[str, list[float | None]], units: dict[str, str],
            *, load_s: float, rate: float) -> tuple[dict[str, Growth], list[str]]:
    """Every series' growth over the steady part of the load, and one line per series that drifted."""
    start = spec.warmup_share * load_s
    fitted: dict[str, Growth] = {}
    drift: list[str] = []
    for name, values in series.items():
        present = [v for t, v in zip(t_s, values, strict=True) if v is not None and start <= t <= load_s]
        level = median(present) if present else 0.0
        bound, text = bounds(spec, name, level, rate)
        found = growth(t_s, values, unit=units.get(name, ""), start=start, end=load_s, bound=bound,
                       bound_text=text)
        if found is None:
            continue
        fitted[name] = found
        if found.drift:
            drift.append(drift_line(name, found))
    return fitted, drift


def drift_line(name: str, found: Growth) -> str:
    """``the task processes' memory grows 143 MB/h (95 % 139..148) from 81 MB: beyond 20 MB/h``."""
    label = LABELS.get(name, name)
    unit = found.unit
    return (f"soak: {label} grows {found.slope_per_h:.3g} {unit}/h (95 % {found.low_per_h:.3g}.."
            f"{found.high_per_h:.3g}) at {found.level:.4g} {unit}, over {found.from_s:.0f}..{found.to_s:.0f} s: "
            f"beyond {found.bound_text}")
