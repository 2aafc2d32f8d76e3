"""The API's in-memory HTTP metrics expose what prometheus_client's own Counter and Histogram would."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from taskbench.service.monitoring import LATENCY_BUCKETS, LATENCY_HELP, REQUESTS_HELP, Tally, _PrometheusMetrics


def _samples(registry: CollectorRegistry) -> list[str]:
    """The exposition's sample lines, without ``_created`` (a Counter's creation time, not a count)."""
    text = generate_latest(registry).decode()
    return sorted(line for line in text.splitlines() if line and not line.startswith("#") and "_created" not in line)


def test_tally_exposes_the_same_samples_as_prometheus_client() -> None:
    reference, ours = CollectorRegistry(), CollectorRegistry()
    prometheus = _PrometheusMetrics(
        Counter("http_requests_total", REQUESTS_HELP, ("method", "status", "handler"), registry=reference),
        Histogram("http_request_duration_highr_seconds", LATENCY_HELP, buckets=LATENCY_BUCKETS, registry=reference))
    tally = Tally(LATENCY_BUCKETS)
    ours.register(tally)
    rng = random.Random(7)
    # every bound itself (le is inclusive), values between and beyond the last bound
    durations = [*LATENCY_BUCKETS, 0.0, 0.003, 0.0999, 0.1001, 61.0, 1e6] + [rng.uniform(0, 12) for _ in range(500)]
    keys = [("POST", 202, "/api/v1/incr/{kind}/{mode}/{backend}"), ("POST", 422, "/api/v1/incr/{kind}/{mode}/{backend}"),
            ("GET", 404, "none"), ("other", 405, "none")]
    for i, seconds in enumerate(durations):
        key = keys[i % len(keys)]
        prometheus.record(key, seconds)
        tally.record(key, seconds)
    ours_samples, reference_samples = _samples(ours), _samples(reference)
    assert f'http_request_duration_highr_seconds_bucket{{le="+Inf"}} {len(durations)}.0' in ours_samples
    # the sums may differ in their last digit (summed in another order): compared as numbers
    split = [(a.rpartition(" "), b.rpartition(" ")) for a, b in zip(ours_samples, reference_samples, strict=True)]
    for (name_a, _, value_a), (name_b, _, value_b) in split:
        assert name_a == name_b
        assert abs(float(value_a) - float(value_b)) <= 1e-9 * max(1.0, abs(float(value_b))), (name_a, value_a, value_b)


def test_an_empty_tally_exposes_zero_buckets() -> None:
    registry = CollectorRegistry()
    registry.register(Tally(LATENCY_BUCKETS))
    samples = _samples(registry)
    assert 'http_request_duration_highr_seconds_count 0.0' in samples
    assert not any(line.startswith("http_requests_total") for line in samples)
