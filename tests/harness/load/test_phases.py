"""``--phases`` and a scenario's ``[[phases]]``: what is accepted, what each phase offers, and the one line
a mistake gets (naming the phase; a scenario file's, its line)."""

from __future__ import annotations

import pytest

from taskbench.driver.load_spec import Stage
from taskbench.harness.load import phases
from taskbench.harness.load.phases import PhaseError

ISSUE = "warmup:10s@500,steady:30s@1000,burst:10s@x1.5,pause-workers:10s,recovery:30s"


def test_the_issues_phases() -> None:
    found = phases.parse(ISSUE)
    assert [(p.kind, p.duration, p.rate) for p in found] == [
        ("warmup", 10, 500), ("steady", 30, 1000), ("burst", 10, 1500), ("pause-workers", 10, 1000),
        ("recovery", 30, 1000)]
    assert [p.measured for p in found] == [False, True, True, True, True]
    assert found[2].multiple == 1.5 and found[2].describe() == "burst:10s@x1.5 = 1500/s"
    assert phases.stages(found) == (Stage(duration=10, rate=500, id_prefix="wp"), Stage(duration=30, rate=1000),
                                    Stage(duration=10, rate=1500), Stage(duration=10, rate=1000),
                                    Stage(duration=30, rate=1000))


def test_durations_units_and_the_steady_rate_they_refer_to() -> None:
    found = phases.parse("burst:1m@x2, steady:90@100, stall-broker:2.5s, steady:20m@10, recovery:5s@x3, steady:1s@0")
    # a multiple before any steady phase takes the first one's rate; after one, the last one before it
    assert [(p.duration, p.rate) for p in found] == [(60, 200), (90, 100), (2.5, 100), (1200, 10), (5, 30), (1, 0)]


@pytest.mark.parametrize(("text", "message"), [
    ("steady", "phase 1 ('steady'): expected KIND:DURATION"),
    ("steady:30s@1000,nap:5s", "phase 2 ('nap:5s'): unknown phase kind 'nap'"),
    ("steady:30s", "a steady phase needs its rate"),
    ("steady:30s@1000,burst:10s", "say the burst's rate"),
    ("warmup:10s@5,burst:10s@x2", "no phase is steady"),
    ("steady:ten@5", "duration 'ten' is not a number of seconds"),
    ("steady:0s@5", "duration must be in"),
    ("steady:5s@fast", "rate 'fast' is neither"),
    ("steady:5s@-3", "rate must be in"),
    ("warmup:5s@10", "every phase is a warm-up"),
    ("steady:50m@1,steady:20m@1", "the phases last 4200 s"),
    # measured phases whose rates are all 0, or too short for an arrival of the one schedule: refused,
    # never a run that ends "failed" with no reason
    ("steady:10s@0", "the measured phases offer no request"),
    ("steady:2s@0,pause-workers:2s,recovery:1s", "the measured phases offer no request"),
    ("warmup:5s@10,steady:5s@0,burst:1s@x3", "the measured phases offer no request"),
    ("warmup:1s@1.5,steady:0.1s@1", "the measured phases offer no request"),
])
def test_a_mistake_is_one_line_naming_the_phase(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^--phases: ") as caught:
        phases.parse(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_scenarios_table_of_phases() -> None:
    found = phases.from_table([{"kind": "steady", "duration": 20, "rate": 300}, {"kind": "burst", "duration": "5s",
                                                                                 "rate": "x2"}])
    assert [(p.kind, p.duration, p.rate) for p in found] == [("steady", 20, 300), ("burst", 5, 600)]
    for entries, index, key in (
        ([{"kind": "steady", "duration": 20, "rate": 300}, {"kind": "burst", "duration": 5, "speed": 2}], 1, "speed"),
        ([{"kind": "steady", "rate": 300}], 0, ""),
        ([{"kind": "steady", "duration": True, "rate": 3}], 0, "duration"),
        ([{"kind": "steady", "duration": 5, "rate": 3}, {"kind": "burst", "duration": 5, "rate": "y"}], 1, "rate"),
    ):
        with pytest.raises(PhaseError) as caught:
            phases.from_table(entries)
        assert (caught.value.index, caught.value.key) == (index, key)
