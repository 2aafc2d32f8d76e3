"""One load split into N segments driven from N places (pods, network namespaces), and merged back exactly.

A segment is the share a process of :meth:`LoadSpec.split` would get, with N in place of the processes:
users, requests, rate and ramp divided as evenly as possible, and its own id prefix (``s<i>.``) so that no
two segments send the same task id. Each segment's driver writes its raw histogram and per-second series;
:func:`merge_segments` adds the histograms bucket by bucket and the series second by second, so the merged
percentiles are those of every request, exactly as if one driver had recorded them all.

Clocks: a driver's ``first_send``/``last_response`` are ``perf_counter`` stamps, which mean nothing on
another host. :func:`on_wall_clock` turns them into Unix time before a segment leaves its driver, so the
merge takes the run's span from the earliest send to the latest answer of all segments, and lines the
per-second rows up by the second each segment started in (within the hosts' clock skew, NTP's few ms).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from taskbench.driver.load_spec import LoadSpec
from taskbench.driver.result import LoadResult, merge_results

#: more segments than this is a typo, not a cluster
MAX_SEGMENTS = 1000


def parse_segment(text: str) -> tuple[int, int]:
    """``"i/N"`` (0 <= i < N): which share of the load this driver takes; a ValueError names the problem."""
    left, sep, right = text.partition("/")
    if not sep or not left.strip().isdigit() or not right.strip().isdigit():
        raise ValueError(f"--segment {text!r}: give INDEX/COUNT, e.g. 0/3 (the first of three)")
    index, count = int(left), int(right)
    if not 1 <= count <= MAX_SEGMENTS:
        raise ValueError(f"--segment {text!r}: COUNT must be in [1, {MAX_SEGMENTS}]")
    if index >= count:
        raise ValueError(f"--segment {text!r}: INDEX must be in [0, {count - 1}] (counted from 0)")
    return index, count


def segment_spec(spec: LoadSpec, index: int, count: int) -> LoadSpec:
    """Segment ``index`` of ``count`` of ``spec``: the share a driver process would get with ``count``
    processes (users, requests, rate and ramp divided), its ids prefixed ``s<index>.``, driven by as many
    processes as ``spec`` names (at most one per user)."""
    if spec.users < count:
        raise ValueError(f"{spec.users} users cannot be split into {count} segments: each driver needs one user "
                         "(give --users at least the number of drivers)")
    share = dataclasses.replace(spec, processes=count).split()[index]
    return dataclasses.replace(share, processes=min(spec.processes, share.users),
                               id_prefix=f"{spec.id_prefix}s{index}.")


def on_wall_clock(result: LoadResult) -> LoadResult:
    """``result`` with its ``first_send``/``last_response`` as Unix time (they were ``perf_counter``
    stamps, of this host only), so that segments driven on different hosts can be merged."""
    offset = time.time() - time.perf_counter()
    if result.first_send:
        result.first_send += offset
        result.last_response += offset
    return result


@dataclass(kw_only=True)
class Segment:
    """What one driver hands the collector: which share it drove, where, and its raw result."""

    index: int
    count: int
    node: str  # the pod's or the namespace's name: a saturated driver is named by it
    load: LoadResult  # stamps on the wall clock (:func:`on_wall_clock`)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "count": self.count, "node": self.node, "load": self.load.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Segment:
        return cls(index=int(data["index"]), count=int(data["count"]), node=str(data["node"]),
                   load=LoadResult.from_dict(data["load"]))


def merge_segments(parts: list[Segment]) -> LoadResult:
    """Every segment's result as one: counts and errors added, ids joined, histograms added bucket by
    bucket, per-second rows added by the wall-clock second they fall in.

    Refuses (ValueError) a set that is not exactly segments 0..N-1 of one N. The driver's saturation check
    holds per driver: the merged result is saturated when any segment was, and its reason names them."""
    if not parts:
        raise ValueError("no segment to merge")
    counts = {p.count for p in parts}
    if len(counts) != 1:
        raise ValueError(f"segments of different splits: counts {sorted(counts)}")
    count = counts.pop()
    indices = sorted(p.index for p in parts)
    if indices != list(range(count)):
        missing = sorted(set(range(count)) - set(indices))
        twice = sorted({i for i in indices if indices.count(i) > 1})
        raise ValueError(f"segments of {count}: " + "; ".join(
            ([f"missing {missing}"] if missing else []) + ([f"twice {twice}"] if twice else [])))
    sent = [p.load.first_send for p in parts if p.load.first_send > 0]
    base = min(sent, default=0.0)
    shifted = []
    for part in sorted(parts, key=lambda p: p.index):
        load = dataclasses.replace(part.load)
        if load.first_send > 0:
            # its rows count from its own start; the merged rows count from the earliest one's second
            shift = round(load.first_send - base)
            load.per_second = [{**row, "t": row["t"] + shift} for row in load.per_second]
        shifted.append(load)
    merged = merge_results(shifted)
    reasons = [f"driver {p.index} ({p.node}): {p.load.saturation_reason}" for p in parts if p.load.saturated]
    if reasons:
        merged.saturated = True
        merged.saturation_reason = "; ".join(reasons)
    return merged
