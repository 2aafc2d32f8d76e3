"""One load split into segments (``taskbench drive --segment i/N``) and merged back exactly."""

from __future__ import annotations

import random

import pytest

from taskbench.driver import LoadResult, LoadSpec
from taskbench.driver.segments import Segment, merge_segments, parse_segment, segment_spec
from taskbench.histogram import Histogram


def _segment(index: int, count: int, values: list[int], *, start: float, rows: list[int],
             utilization: float = 0.2) -> Segment:
    load = LoadResult(model="open")
    for value in values:
        load.latency.record(value)
    load.requests = load.completed = load.ok = len(values)
    load.accepted_ids = [f"s{index}.0-{n}" for n in range(len(values))]
    load.first_send, load.last_response = start, start + len(rows)
    load.per_second = [{"t": t, "completed": n, "ok": n, "errors": 0, "users": 1} for t, n in enumerate(rows)]
    load.cpu = [{"cpu_s": utilization, "wall_s": 1.0, "utilization": utilization}]
    return Segment(index=index, count=count, node=f"driver-{index}", load=load.finalize())


def test_merged_histogram_is_the_histogram_of_every_request() -> None:
    rng = random.Random(30)
    values = [int(rng.lognormvariate(8, 1.2)) for _ in range(30_000)]  # µs, a long tail
    whole = Histogram()
    for value in values:
        whole.record(value)
    shares: list[list[int]] = [[], [], []]
    for value in values:  # each request went to one driver, at random
        shares[rng.randrange(3)].append(value)
    parts = [_segment(i, 3, share, start=1000.0, rows=[len(share)]) for i, share in enumerate(shares)]

    merged = merge_segments(parts)

    assert merged.latency.to_dict() == whole.to_dict()  # bucket by bucket, count, sum, min and max
    for q in (50, 90, 95, 99, 99.9, 100):
        assert merged.latency.percentile(q) == whole.percentile(q)
    assert merged.ok == len(values) and len(set(merged.accepted_ids)) == len(values)


def test_per_second_rows_add_up_by_the_wall_clock_second() -> None:
    first = _segment(0, 2, [1000] * 30, start=5000.0, rows=[10, 10, 10])
    second = _segment(1, 2, [1000] * 20, start=5001.0, rows=[10, 10])  # started a second later

    merged = merge_segments([second, first])

    assert [(row["t"], row["ok"]) for row in merged.per_second] == [(0, 10), (1, 20), (2, 20)]
    assert merged.first_send == 5000.0 and merged.last_response == 5003.0
    assert merged.elapsed_s == 3.0


def test_a_saturated_driver_is_named_in_the_merged_result() -> None:
    calm = _segment(0, 2, [1000], start=1.0, rows=[1])
    busy = _segment(1, 2, [1000], start=1.0, rows=[1], utilization=0.97)

    merged = merge_segments([calm, busy])

    assert merged.saturated
    assert merged.saturation_reason is not None and merged.saturation_reason.startswith("driver 1 (driver-1)")
    assert not merge_segments([calm, _segment(1, 2, [1000], start=1.0, rows=[1])]).saturated


def test_merge_refuses_a_missing_or_repeated_segment() -> None:
    zero, two = _segment(0, 3, [1], start=1.0, rows=[1]), _segment(2, 3, [1], start=1.0, rows=[1])
    with pytest.raises(ValueError, match=r"missing \[1\]"):
        merge_segments([zero, two])
    with pytest.raises(ValueError, match=r"twice \[0\]"):
        merge_segments([zero, zero, two])
    with pytest.raises(ValueError, match="different splits"):
        merge_segments([zero, _segment(1, 2, [1], start=1.0, rows=[1])])


def test_segments_share_the_load_and_never_an_id() -> None:
    spec = LoadSpec(model="open", users=50, rate=3000, requests=20_001, processes=4, id_prefix="")
    shares = [segment_spec(spec, i, 3) for i in range(3)]

    assert sum(s.users for s in shares) == 50
    assert sum(s.requests or 0 for s in shares) == 20_001
    assert [s.share for s in shares] == [(0, 3), (1, 3), (2, 3)] and {s.rate for s in shares} == {3000}
    assert len({s.id_prefix for s in shares}) == 3
    assert all(s.processes == 4 for s in shares)
    assert segment_spec(LoadSpec(users=4, requests=10, processes=4), 0, 3).processes == 2  # one user each


def test_a_segment_needs_a_user_and_a_valid_index() -> None:
    with pytest.raises(ValueError, match="cannot be split into 3"):
        segment_spec(LoadSpec(users=2, requests=10), 0, 3)
    assert parse_segment("2/3") == (2, 3)
    for bad in ("3/3", "1", "a/3", "0/0", "-1/3"):
        with pytest.raises(ValueError, match="--segment"):
            parse_segment(bad)
