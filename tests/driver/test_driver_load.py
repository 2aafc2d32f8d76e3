"""End-to-end runs of the driver against a scripted raw asyncio server (subprocess)."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskbench.driver import LoadResult, LoadSpec, RequestTemplate, run_load, run_load_async, run_load_together

SERVER = Path(__file__).with_name("_server.py")
BODY = '{{"id": "{task_id}", "at": {enqueued_at}}}'


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "test server did not start"
        yield int(proc.stdout.readline())
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def _call(port: int, method: str, path: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path)
        data = conn.getresponse().read()
    finally:
        conn.close()
    return json.loads(data) if data else None


def _reset(port: int) -> None:
    _call(port, "POST", "/_reset")


def _stats(port: int) -> dict[str, Any]:
    stats: dict[str, Any] = _call(port, "GET", "/_stats")
    return stats


def _run(port: int, path: str, **spec: Any) -> LoadResult:
    template = RequestTemplate(host="127.0.0.1", port=port, path=path, body=BODY)
    spec.setdefault("timeout", 5.0)
    return asyncio.run(run_load_async(template, LoadSpec(**spec)))


def _check_consistent(res: LoadResult) -> None:
    assert len(set(res.accepted_ids)) == len(res.accepted_ids) == res.ok
    assert res.ok + sum(res.errors.values()) == res.requests
    assert len(res.failed_ids) == sum(res.errors.values())
    assert not set(res.failed_ids) & set(res.accepted_ids)
    assert sum(r["ok"] for r in res.per_second) == res.ok
    assert res.latency.count == res.completed
    json.dumps(res.to_dict())


def test_request_bound_is_exact_and_each_body_has_its_own_id(port: int) -> None:
    _reset(port)
    before = time.time()
    res = _run(port, "/ok", users=7, requests=503, id_prefix="w")
    _check_consistent(res)
    assert res.requests == res.ok == 503
    assert res.errors == {}
    bodies = [json.loads(b) for b in _stats(port)["bodies"]]
    assert sorted(b["id"] for b in bodies) == sorted(res.accepted_ids)
    assert all(b["id"].startswith("w0-") for b in bodies)
    assert all(before - 1 <= b["at"] <= time.time() + 1 for b in bodies)
    assert res.elapsed_s > 0
    assert res.rps > 0
    assert res.cpu[0]["wall_s"] > 0


def test_run_load_in_worker_processes(port: int) -> None:
    _reset(port)
    template = RequestTemplate(host="localhost", port=port, path="/ok", body=BODY)
    res = run_load(template, LoadSpec(users=4, requests=401, processes=2, timeout=5.0))
    _check_consistent(res)
    assert res.requests == res.ok == 401
    assert {i.split("-")[0] for i in res.accepted_ids} == {"0", "1"}
    assert len(res.cpu) == 2
    assert all(0 <= c["utilization"] <= 1.5 for c in res.cpu)
    assert res.max_utilization == max(c["utilization"] for c in res.cpu)
    assert len(_stats(port)["bodies"]) == 401


def test_targets_run_together_stop_when_the_first_reaches_its_bound(port: int) -> None:
    _reset(port)
    fast, slow = (RequestTemplate(host="127.0.0.1", port=port, path=p, body=BODY) for p in ("/ok", "/slow"))
    spec = LoadSpec(users=4, requests=300, timeout=5.0)
    res_fast, res_slow = run_load_together([fast, slow], spec)
    for res in (res_fast, res_slow):
        _check_consistent(res)
        assert res.cpu == res_fast.cpu, "one driver process: the same CPU figures for both"
    assert res_fast.requests == res_fast.ok == 300, "the fast target reaches its bound"
    # /slow answers each request after 200 ms: 4 users do ~20 a second; it stopped with the fast one
    assert 0 < res_slow.ok < 300 and res_slow.requests == res_slow.ok
    assert abs(res_fast.first_send - res_slow.first_send) < 0.5, "both start together"
    assert res_slow.last_response - res_fast.last_response < 0.5, "the slow one stops with the fast one"
    assert {i.split("-")[0] for i in res_fast.accepted_ids} == {"0"}
    assert {i.split("-")[0] for i in res_slow.accepted_ids} == {"1"}, "each target its own ids"
    assert len(_stats(port)["bodies"]) == res_fast.ok + res_slow.ok
    with pytest.raises(ValueError, match="at least one"):
        run_load_together([], spec)


def test_http_500_are_errors_with_their_ids(port: int) -> None:
    res = _run(port, "/fail", users=3, requests=30)
    _check_consistent(res)
    failing = {f"0-{i}" for i in range(0, 30, 3)}
    assert res.errors == {"http_500": 10}
    assert res.failed_ids == dict.fromkeys(failing, "http_500")
    assert res.ok == 20
    assert res.completed == 30


def test_a_409_is_recorded_as_refused(port: int) -> None:
    """A 409 (a known task id) is a non-2xx the driver records with its id, as ``http_409``: the
    audit counts those ids as refused, and the summary's errors % leaves them out."""
    from taskbench.harness.case.audit import queue_status, queue_summary

    res = _run(port, "/known", users=2, requests=20)
    _check_consistent(res)
    assert res.errors == {"http_409": 5}
    assert sorted(res.refused_ids()) == sorted(f"0-{i}" for i in range(0, 20, 4))
    load = res.to_model()
    assert load.refused == 5
    summary = queue_summary(load, None, load_start=0.0, drained=True, fault=None)
    assert summary.errors_pct == 0.0
    summary.accepted, summary.refused = 15, 5
    assert queue_status(summary, audit_ok=True, drained=True, failures=[]) == "errors"


def test_chunked_responses(port: int) -> None:
    res = _run(port, "/chunked", users=4, requests=40)
    _check_consistent(res)
    assert res.ok == 40


def test_connection_close_reconnects(port: int) -> None:
    _reset(port)
    res = _run(port, "/close", users=3, requests=15)
    _check_consistent(res)
    assert res.ok == 15
    # One connection per request, plus the one used to ask for the stats.
    assert _stats(port)["connections"] >= 16


def test_without_keepalive_every_request_has_its_own_connection(port: int) -> None:
    _reset(port)
    res = _run(port, "/ok", users=3, requests=30, keepalive=False)
    _check_consistent(res)
    assert res.ok == 30
    # ApacheBench without -k: a connection per request, plus the reset's and the stats' own; a user
    # that connected while the others took the last requests closes its connection unused (at most 2)
    assert 32 <= _stats(port)["connections"] <= 34
    _reset(port)
    kept = _run(port, "/ok", users=3, requests=30)
    assert kept.ok == 30 and _stats(port)["connections"] == 5, "keep-alive: one connection a user"


def test_body_delimited_by_close(port: int) -> None:
    res = _run(port, "/eof", users=2, requests=10)
    _check_consistent(res)
    assert res.ok == 10


def test_refused_port_gives_connect_errors() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    res = _run(free, "/ok", users=2, requests=10)
    _check_consistent(res)
    assert res.errors == {"connect": 10}
    assert res.ok == 0


def test_server_that_never_answers_times_out(port: int) -> None:
    res = _run(port, "/never", users=2, requests=4, timeout=0.3)
    _check_consistent(res)
    assert res.errors == {"timeout": 4}
    assert sorted(res.failed_ids) == ["0-0", "0-1", "0-2", "0-3"]


def test_duration_bound_stops_the_run(port: int) -> None:
    res = _run(port, "/ok", users=4, duration=0.5)
    _check_consistent(res)
    assert res.requests > 0
    assert res.ok == res.requests
    assert len(res.per_second) <= 2


def test_ramp_adds_users_up_to_the_limit(port: int) -> None:
    res = _run(port, "/ok", model="ramp", users=5, ramp_per_s=20.0, duration=0.8)
    _check_consistent(res)
    assert res.ok > 0
    assert 1 <= max(r["users"] for r in res.per_second) <= 5


def test_open_model_counts_latency_from_intended_send(port: int) -> None:
    # 20 arrivals in 0.2 s, but 2 connections x 200 ms serve only 10/s: later
    # arrivals queue in the driver and their latency must include the wait
    # (the last one is served at about 2 s, 1.8 s after it was due; the median about 1.1 s after).
    res = _run(port, "/slow", model="open", rate=100.0, users=2, requests=20)
    _check_consistent(res)
    assert res.ok == 20
    assert res.intended == 20
    s = res.latency.summary()
    assert s["max"] > 1500.0  # ms; the service time alone is 200 ms
    assert s["p50"] > 800.0


def test_open_model_at_a_modest_rate(port: int) -> None:
    res = _run(port, "/ok", model="open", rate=200.0, users=8, duration=0.5)
    _check_consistent(res)
    assert 90 <= res.requests <= 110
    assert res.intended == res.requests
    assert res.unsent == 0


def test_an_open_load_for_a_duration_sends_rate_times_duration_even_when_its_loop_is_late(port: int) -> None:
    # a busy machine wakes the driver's loop late: the arrivals due meanwhile go out at once, but none due at
    # or after the duration's end, and the stop's timer, due meanwhile too, cuts none of them (4 s at 20/s
    # must be 80: a busy CI machine saw more, a late start fewer)
    template = RequestTemplate(host="127.0.0.1", port=port, path="/ok", body=BODY)

    async def late() -> LoadResult:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, time.sleep, 0.5)  # the whole loop blocked from 0.2 s to 0.7 s, past the end
        return await run_load_async(template, LoadSpec(model="open", rate=100.0, users=8, duration=0.4,
                                                       timeout=5.0))

    res = asyncio.run(late())
    _check_consistent(res)
    assert res.intended == 40 and res.requests == 40, (res.intended, res.requests)


def test_paced_users_send_at_most_one_request_per_pace(port: int) -> None:
    """Locust's constant_pacing: 5 users paced at 0.2 s for 1 s send about 25 requests, not thousands."""
    _reset(port)
    paced = _run(port, "/ok", users=5, pace=0.2, duration=1.0)
    _check_consistent(paced)
    assert 18 <= paced.ok <= 30
    unpaced = _run(port, "/ok", users=5, duration=0.5)
    assert unpaced.ok > 4 * paced.ok


def test_paced_ramp_adds_users(port: int) -> None:
    _reset(port)
    res = _run(port, "/ok", model="ramp", users=10, ramp_per_s=20.0, pace=0.5, duration=1.2)
    _check_consistent(res)
    assert max(r["users"] for r in res.per_second) == 10
    assert res.errors == {}
