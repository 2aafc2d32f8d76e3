"""The open model's rate schedule (``LoadSpec.schedule``, the phases of ``taskbench run --phases``):
each stage sends its own number of arrivals under its own id prefix, and its answers are counted apart."""

from __future__ import annotations

import asyncio

import pytest

from taskbench.driver import LoadResult, LoadSpec, RequestTemplate, run_load_async
from taskbench.driver.load_spec import Stage
from taskbench.driver.result import merge_results
from tests.driver.test_driver_load import BODY, _reset, _stats
from tests.driver.test_driver_load import port as _port

port = _port  # the scripted server of the driver's tests, a fixture


def _run(port: int, schedule: tuple[Stage, ...], path: str = "/ok") -> LoadResult:
    template = RequestTemplate(host="127.0.0.1", port=port, path=path, body=BODY)
    return asyncio.run(run_load_async(template, LoadSpec(model="open", users=8, schedule=schedule, timeout=5.0)))


def test_each_stage_sends_its_rate_for_its_duration_under_its_prefix(port: int) -> None:
    _reset(port)
    schedule = (Stage(duration=0.5, rate=40, id_prefix="wp"), Stage(duration=0.4, rate=0),
                Stage(duration=0.5, rate=60))
    res = _run(port, schedule)
    # arrivals at begin + k / rate inside each stage: 20, none, 30 (the count does not depend on timing)
    assert [s.intended for s in res.stages] == [20, 0, 30]
    assert [s.ok for s in res.stages] == [20, 0, 30]
    assert [s.latency.count for s in res.stages] == [20, 0, 30]
    assert res.requests == res.ok == 50
    warm = [i for i in res.accepted_ids if i.startswith("wp")]
    assert len(warm) == 20 and all(i.startswith("wp0-") for i in warm)
    assert sorted(i for i in res.accepted_ids if not i.startswith("wp")) == sorted(f"0-{n}" for n in range(20, 50))
    assert len(_stats(port)["bodies"]) == 50


def test_a_stages_failures_are_its_errors(port: int) -> None:
    res = _run(port, (Stage(duration=0.3, rate=30), Stage(duration=0.3, rate=30)), path="/fail")
    assert sum(s.errors for s in res.stages) == sum(res.errors.values()) == 6  # every third id of 18
    assert [s.ok + s.errors for s in res.stages] == [9, 9]


def test_stages_merge_over_processes_and_survive_a_round_trip(port: int) -> None:
    res = _run(port, (Stage(duration=0.25, rate=40), Stage(duration=0.25, rate=80)))
    again = LoadResult.from_dict(res.to_dict())
    merged = merge_results([res, again])
    assert [s.intended for s in merged.stages] == [2 * s.intended for s in res.stages] == [20, 40]
    assert merged.stages[1].latency.count == 2 * res.stages[1].latency.count
    model = merged.to_model()
    assert [s.ok for s in model.stages] == [20, 40]


def test_split_shares_out_the_schedules_arrivals() -> None:
    spec = LoadSpec(model="open", users=4, processes=2,
                    schedule=(Stage(duration=2, rate=100), Stage(duration=1, rate=0)))
    parts = spec.split()
    assert [p.schedule for p in parts] == [spec.schedule] * 2
    assert [p.share for p in parts] == [(0, 2), (1, 2)]
    assert spec.max_duration == spec.scheduled_s == 3


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"model": "closed"}, "needs the open model"),
    ({"rate": 10.0}, "a rate or a schedule"),
    ({"duration": 5.0}, "leave out duration"),
])
def test_a_schedule_is_the_open_models_whole_bound(kwargs: dict[str, object], message: str) -> None:
    spec: dict[str, object] = {"model": "open", "schedule": (Stage(duration=1, rate=10),), **kwargs}
    with pytest.raises(ValueError, match=message):
        LoadSpec(**spec)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"duration": 0, "rate": 1}, "duration must be in"), ({"duration": 1, "rate": -1}, "rate must be in"),
    ({"duration": 1, "rate": 1, "id_prefix": "a b"}, "ASCII without whitespace"),
])
def test_a_stage_is_checked(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Stage(**kwargs)  # type: ignore[arg-type]
