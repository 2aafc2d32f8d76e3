"""Mann–Whitney U on weighted samples: is one run's distribution shifted from the other's?

Written here rather than taken from scipy (a 40 MB dependency for one test): the samples are either
per-second counts (a few dozen values) or HDR histograms, whose buckets are values with a count, so
the test is computed on ``(value, count)`` pairs with mid-ranks for ties, the tie-corrected variance
and the normal approximation with continuity correction (two-sided). Below 3 samples a side it does
not decide (p = 1): a one-second run has no noise estimate.

A percentile is tested on its own, not through the whole distribution (a run can have a lower median
and a longer tail): each observation becomes 1 when it lies above the first run's percentile, else 0,
and the test compares those (on 0/1 samples it is the two-proportion test).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

MIN_SAMPLES = 3


@dataclass(frozen=True)
class Test:
    n_a: int
    n_b: int
    u: float
    p: float
    #: P(B > A) + P(B = A) / 2: 0.5 is no shift, above 0.5 B tends to be larger
    b_larger: float

    @property
    def decided(self) -> bool:
        return self.n_a >= MIN_SAMPLES and self.n_b >= MIN_SAMPLES


def above(hist: list[tuple[float, int]], value: float) -> list[tuple[float, int]]:
    """Weighted samples as 0/1: is each observation above ``value``? (for a test of one percentile)"""
    over = sum(c for v, c in hist if v > value)
    under = sum(c for v, c in hist if v <= value)
    return [(0.0, under), (1.0, over)]


def counted(values: Iterable[float]) -> list[tuple[float, int]]:
    """Plain samples as ``(value, 1)`` pairs."""
    return [(float(v), 1) for v in values]


def mann_whitney(a: list[tuple[float, int]], b: list[tuple[float, int]]) -> Test:
    """Two-sided Mann–Whitney U of ``a`` against ``b``, each a list of ``(value, count)``."""
    n_a = sum(c for _, c in a if c > 0)
    n_b = sum(c for _, c in b if c > 0)
    if n_a < MIN_SAMPLES or n_b < MIN_SAMPLES:
        return Test(n_a, n_b, 0.0, 1.0, 0.5)
    counts: dict[float, list[int]] = {}
    for value, count in a:
        if count > 0:
            counts.setdefault(value, [0, 0])[0] += count
    for value, count in b:
        if count > 0:
            counts.setdefault(value, [0, 0])[1] += count
    rank_sum_a = 0.0
    below = 0
    ties = 0.0
    for value in sorted(counts):
        in_a, in_b = counts[value]
        t = in_a + in_b
        mid = below + (t + 1) / 2.0  # mid-rank of this group of equal values
        rank_sum_a += in_a * mid
        ties += t**3 - t
        below += t
    n = n_a + n_b
    u_a = rank_sum_a - n_a * (n_a + 1) / 2.0  # pairs where a > b (+ half the ties)
    mean = n_a * n_b / 2.0
    variance = n_a * n_b / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    b_larger = 1.0 - u_a / (n_a * n_b)
    if variance <= 0:
        return Test(n_a, n_b, u_a, 1.0, b_larger)
    z = (abs(u_a - mean) - 0.5) / math.sqrt(variance)
    p = math.erfc(max(0.0, z) / math.sqrt(2.0))
    return Test(n_a, n_b, u_a, min(1.0, p), b_larger)
