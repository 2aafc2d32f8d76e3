"""The open model's arrivals are one schedule across the stages: a stage boundary never adds an arrival,
and the driver processes (or segments) share the schedule's arrivals out instead of rounding up each."""

from __future__ import annotations

import asyncio
import math
from fractions import Fraction

import pytest

from taskbench.driver import LoadSpec, RequestTemplate, run_load, run_load_async
from taskbench.driver.arrivals import stretches, total
from taskbench.driver.load_spec import Stage
from taskbench.driver.segments import segment_spec
from taskbench.harness.load import phases
from tests.driver.test_driver_load import BODY, _reset, _stats
from tests.driver.test_driver_load import port as _port

port = _port  # the scripted server of the driver's tests, a fixture

#: phase lists of several shapes, and the arrivals each offers: the integral of its rate, rounded up once
SHAPES = [
    (",".join(["steady:0.5s@1"] * 10), 5),  # the issue's: 10 phases, one arrival each before
    (",".join(["steady:0.01s@10"] * 100), 10),  # 0.01 s phases: 100x the rate before
    ("steady:5s@1", 5),
    ("warmup:0.3s@10,steady:0.7s@10", 10),
    ("steady:0.25s@4,pause-workers:0.5s@0,recovery:0.25s@4", 2),
    ("steady:0.1s@3,burst:0.1s@x2,steady:0.1s@3,burst:0.1s@x2", 2),  # 0.3 + 0.6 + 0.3 + 0.6 = 1.8
    ("steady:0.3s@0.1,steady:0.3s@0.1", 1),  # one arrival at 0, and the count never crosses 1 again
    ("steady:1s@0,burst:0.2s@7", 2),  # a pause first: the burst's arrivals start at its own start
]


def _schedule(text: str) -> tuple[Stage, ...]:
    return phases.stages(phases.parse(text))


def _per_stage_expected(schedule: tuple[Stage, ...]) -> list[int]:
    """ceil(L1) - ceil(L0) per stage, with L the load offered so far (decimal arithmetic)."""
    out, offered = [], Fraction(0)
    for stage in schedule:
        after = offered + Fraction(str(stage.rate)) * Fraction(str(stage.duration))
        out.append(math.ceil(after) - math.ceil(offered))
        offered = after
    return out


@pytest.mark.parametrize(("text", "expected"), SHAPES)
def test_a_phase_list_offers_the_integral_of_its_rate(text: str, expected: int) -> None:
    schedule = _schedule(text)
    assert total(schedule) == expected
    assert [s.count for s in stretches(schedule)] == _per_stage_expected(schedule)
    # each arrival inside its stage, in order, one after the other
    dues = [s.due(n) for s in stretches(schedule) for n in range(s.first, s.end, s.step)]
    assert dues == sorted(dues) and len(dues) == expected
    for s in stretches(schedule):
        assert all(s.begin - 1e-9 <= s.due(n) < s.until + 1e-9 for n in range(s.first, s.end, s.step))


@pytest.mark.parametrize(("text", "expected"), SHAPES)
@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shares_take_every_arrival_once(text: str, expected: int, count: int) -> None:
    schedule = _schedule(text)
    taken = sorted(n for i in range(count) for s in stretches(schedule, (i, count)) for n in range(s.first, s.end, s.step))
    assert taken == list(range(expected))
    assert sum(total(schedule, (i, count)) for i in range(count)) == expected


def _run(port: int, spec: LoadSpec) -> tuple[int, list[int]]:
    template = RequestTemplate(host="127.0.0.1", port=port, path="/ok", body=BODY)
    res = asyncio.run(run_load_async(template, spec))
    return res.requests, [s.intended for s in res.stages]


@pytest.mark.parametrize(("text", "expected"), [SHAPES[0], SHAPES[1], SHAPES[3], SHAPES[4], SHAPES[5]])
def test_the_driver_sends_the_schedules_arrivals_exactly(port: int, text: str, expected: int) -> None:
    _reset(port)
    schedule = _schedule(text)
    sent, per_stage = _run(port, LoadSpec(model="open", users=4, schedule=schedule, timeout=5.0))
    assert sent == expected
    assert per_stage == _per_stage_expected(schedule)
    assert len(_stats(port)["bodies"]) == expected


def test_driver_processes_together_send_the_schedules_arrivals(port: int) -> None:
    _reset(port)
    schedule = _schedule(",".join(["steady:0.05s@20"] * 6))  # 6 arrivals; divided rates sent 3 x 6 before
    template = RequestTemplate(host="127.0.0.1", port=port, path="/ok", body=BODY)
    res = run_load(template, LoadSpec(model="open", users=3, processes=3, schedule=schedule, timeout=5.0))
    assert res.requests == res.ok == 6 == len(_stats(port)["bodies"])
    assert [s.intended for s in res.stages] == [1] * 6


def test_one_rate_over_processes_and_segments_sends_rate_times_duration() -> None:
    # 10/s for 0.1 s is one arrival: three processes at 10/3 each would have sent one each
    spec = LoadSpec(model="open", users=6, rate=10, duration=0.1, processes=3)
    whole = [Stage(duration=0.1, rate=10)]
    assert sum(total(whole, part.share) for part in spec.split()) == total(whole) == 1
    # two segments of three processes each: six shares that take every arrival once
    shares = [part.share for i in range(2) for part in segment_spec(spec, i, 2).split()]
    assert sorted(shares) == [(i, 6) for i in range(6)]
