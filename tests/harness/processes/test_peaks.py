"""Peaks: the most each count reached over a stretch, sampled on a thread; a failed read is a missing sample."""

from __future__ import annotations

from taskbench.harness.processes.peaks import Peaks
from taskbench.wait import wait_until


def test_the_most_each_count_reached_survives_failed_and_missing_reads() -> None:
    reads = iter([{"a": 1, "b": None}, RuntimeError("a /proc read failed"), {"a": 5, "b": 2}])

    def read() -> dict[str, int | None]:
        found = next(reads, {"a": 3})
        if isinstance(found, Exception):
            raise found
        return found

    with Peaks(read, interval=0.01, name="test") as peaks:
        wait_until(lambda: peaks.most.get("b") is not None, 30, what="the third read", interval=0.01)
    assert peaks.most == {"a": 5, "b": 2}  # the later, lower "a" (3) does not lower the peak
