"""One driver of a distributed run (``taskbench drive --segment i/N``): wait for the others, drive one
share of the load, hand the result to the collector through the ledger's Redis.

Every key lives under the run's prefix (``taskbench:<run>:``), so the run's clean-up deletes them:

- ``drivers`` (hash): segment index -> the driver's node; the barrier counts it;
- ``drivers:start``: the Unix time every driver starts sending at, set once by the last to arrive
  (``SET NX``), :data:`START_DELAY` s ahead, so that drivers on other hosts start within their clocks' skew;
- ``segments`` (hash): segment index -> the segment's result (JSON, :class:`~taskbench.driver.segments.Segment`);
- ``drivers:load``: the whole load every driver was given (JSON), for the result's parameters.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

from taskbench.driver import LoadSpec, RequestTemplate, run_load
from taskbench.driver.segments import Segment, on_wall_clock, segment_spec
from taskbench.harness import HarnessError
from taskbench.wait import WaitTimeoutError, wait_until

Say = Callable[[str], None]

#: seconds between the last driver's arrival and the common start: every driver sees the start key by then
START_DELAY = 2.0


def drivers_key(prefix: str) -> str:
    return f"{prefix}drivers"


def start_key(prefix: str) -> str:
    return f"{prefix}drivers:start"


def segments_key(prefix: str) -> str:
    return f"{prefix}segments"


def load_key(prefix: str) -> str:
    return f"{prefix}drivers:load"


def whole_load(client: Any, prefix: str) -> dict[str, Any]:
    """The load the drivers were given (as ``RunConfig.to_dict`` records it), {} when none said."""
    raw = client.get(load_key(prefix))
    return dict(json.loads(raw)) if raw else {}


def barrier(client: Any, prefix: str, index: int, count: int, node: str, *, timeout: float) -> float:
    """Register this driver and wait until all ``count`` have; returns the common start (Unix time).

    A driver missing after ``timeout`` s (a pod not scheduled, a second driver with the same index) is one
    HarnessError naming the indices that never arrived."""
    client.hset(drivers_key(prefix), str(index), node)
    if int(client.hlen(drivers_key(prefix))) >= count:
        client.set(start_key(prefix), f"{time.time() + START_DELAY:.6f}", nx=True)
    found: dict[str, float] = {}

    def started() -> bool:
        value = client.get(start_key(prefix))
        if value is None:
            if int(client.hlen(drivers_key(prefix))) >= count:  # arrived after the last one checked
                client.set(start_key(prefix), f"{time.time() + START_DELAY:.6f}", nx=True)
            return False
        found["at"] = float(value)
        return True

    try:
        wait_until(started, timeout, interval=0.05, what="every driver to arrive")
    except WaitTimeoutError:
        arrived = {int(k) for k in client.hkeys(drivers_key(prefix))}
        missing = sorted(set(range(count)) - arrived)
        raise HarnessError(f"driver {index}/{count}: drivers {missing} did not arrive within {timeout:g} s "
                           "(each --segment INDEX/COUNT must run once)") from None
    return found["at"]


def drive_segment(template: RequestTemplate, spec: LoadSpec, *, index: int, count: int, node: str, client: Any,
                  prefix: str, barrier_timeout: float, say: Say = print) -> Segment:
    """Wait at the barrier, drive segment ``index`` of ``count`` of ``spec`` from the common start, and
    publish the segment's result (raw histogram and per-second rows) under the run's prefix."""
    share = segment_spec(spec, index, count)
    client.set(load_key(prefix), json.dumps(dataclasses.asdict(spec)))
    say(f"driver {index}/{count} ({node}): waiting for {count} driver(s)")
    start_at = barrier(client, prefix, index, count, node, timeout=barrier_timeout)
    time.sleep(max(0.0, start_at - time.time()))
    say(f"driver {index}/{count}: {share.users} users, "
        + (f"{share.rate:g}/s, " if share.rate else "") + (f"{share.requests} requests" if share.requests
                                                           else f"{share.duration:g} s"))
    load = on_wall_clock(run_load(template, share))
    segment = Segment(index=index, count=count, node=node, load=load)
    client.hset(segments_key(prefix), str(index), json.dumps(segment.to_dict()))
    say(f"driver {index}/{count}: {load.ok} accepted of {load.requests} at {load.rps:.0f} req/s"
        + (f"; saturated: {load.saturation_reason}" if load.saturated else ""))
    return segment


def wait_segments(client: Any, prefix: str, count: int, *, timeout: float,
                  abort: Callable[[], str | None] | None = None) -> list[Segment]:
    """Every segment's result, once all ``count`` drivers have published theirs (within ``timeout`` s);
    ``abort`` ends the wait early with its line (a driver process that died)."""
    def published() -> bool:
        return int(client.hlen(segments_key(prefix))) >= count

    try:
        wait_until(published, timeout, interval=0.2, what=f"{count} driver(s) to publish their results",
                   abort=abort)
    except WaitTimeoutError as exc:
        have = sorted(int(k) for k in client.hkeys(segments_key(prefix)))
        raise HarnessError(f"{exc}; results from drivers {have}") from None
    raw = client.hgetall(segments_key(prefix))
    return [Segment.from_dict(json.loads(value)) for value in raw.values()]
