"""Validation of RequestTemplate / LoadSpec and LoadResult serialisation."""

from __future__ import annotations

import json

import pytest

from taskbench.driver import LoadResult, LoadSpec, RequestTemplate
from taskbench.driver.result import merge_results
from taskbench.histogram import Histogram


@pytest.mark.parametrize("host", ["10.0.0.1", "192.168.1.5", "example.com", "0.0.0.0", "8.8.8.8"])
def test_non_loopback_host_rejected(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        RequestTemplate(host=host, port=80, path="/")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "localhost"])
def test_loopback_hosts_accepted(host: str) -> None:
    t = RequestTemplate(host=host, port=8000, path="/x")
    assert t.head_prefix().startswith(b"POST /x HTTP/1.1\r\n")


def test_bad_body_placeholder_rejected_early() -> None:
    with pytest.raises(KeyError):
        RequestTemplate(host="127.0.0.1", port=1, path="/", body="{nope}")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"users": 0, "requests": 1}, "users"),
        ({"processes": 0, "requests": 1}, "processes"),
        ({"processes": 3, "users": 2, "requests": 1}, "processes"),
        ({"model": "open", "requests": 1}, "rate"),
        ({"model": "open", "rate": 0.0, "requests": 1}, "rate"),
        ({}, "bounded"),
        ({"duration": 90_000.0}, "duration"),  # a day at most (a soak of hours is allowed)
        ({"duration": 0.0}, "duration"),
        ({"requests": 1, "timeout": 0.0}, "timeout"),
    ],
)
def test_loadspec_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LoadSpec(**kwargs)  # type: ignore[arg-type]


def test_split_divides_users_and_requests_and_shares_out_the_arrivals() -> None:
    spec = LoadSpec(model="open", users=5, rate=90.0, requests=10, processes=3)
    parts = spec.split()
    assert [p.users for p in parts] == [2, 2, 1]
    assert [p.requests for p in parts] == [4, 3, 3]
    # each process takes every third arrival of the whole load's schedule: the rate is not divided
    assert [p.rate for p in parts] == [90.0] * 3
    assert [p.share for p in parts] == [(0, 3), (1, 3), (2, 3)]
    assert all(p.processes == 1 for p in parts)


def test_result_roundtrip_and_merge() -> None:
    h = Histogram()
    h.record(1500)
    a = LoadResult(
        model="closed", requests=3, completed=2, ok=1, accepted_ids=["0-0"],
        failed_ids={"0-1": "http_500", "0-2": "timeout"},
        errors={"http_500": 1, "timeout": 1}, latency=h,
        per_second=[{"t": 0, "completed": 2, "ok": 1, "errors": 2, "users": 2}],
        cpu=[{"cpu_s": 0.5, "wall_s": 1.0, "utilization": 0.5}],
        first_send=10.0, last_response=11.0,
    )
    b = LoadResult.from_dict(json.loads(json.dumps(a.finalize().to_dict())))
    assert b.to_dict() == a.to_dict()
    b.cpu = [{"cpu_s": 0.95, "wall_s": 1.0, "utilization": 0.95}]
    b.accepted_ids = ["1-0"]
    m = merge_results([a, b])
    assert m.requests == 6
    assert m.ok == 2
    assert m.errors == {"http_500": 2, "timeout": 2}
    assert m.per_second == [{"t": 0, "completed": 4, "ok": 2, "errors": 4, "users": 4}]
    assert m.latency.count == 2
    assert m.elapsed_s == pytest.approx(1.0)
    assert m.rps == pytest.approx(4.0)
    assert m.saturated
    assert m.saturation_reason is not None
    assert "core" in m.saturation_reason
