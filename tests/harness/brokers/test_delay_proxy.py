"""--broker-delay: a real delay line between the API/workers and a real broker, and nothing left after it."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import psutil
import pytest
import redis

from taskbench.harness.brokers.delay_proxy import behind, target_of
from taskbench.harness.brokers.redis import EmbeddedRedis
from taskbench.harness.faults.kinds import delay_of
from taskbench.harness.processes.process_set import ProcessSet
from taskbench.net import free_port, listening
from taskbench.wait import wait_until
from tests.helpers import harness_cli


def test_behind_keeps_the_credentials_and_the_path() -> None:
    assert behind("redis://:secret@127.0.0.1:6380/0", 4000) == "redis://:secret@127.0.0.1:4000/0"
    assert behind("amqp://u:p@10.0.0.5:5672/vhost", 4001) == "amqp://u:p@127.0.0.1:4001/vhost"
    assert behind("nats://127.0.0.1:4222", 4002) == "nats://127.0.0.1:4002"
    assert target_of("nats://tok@host.example", 4222) == ("host.example", 4222)


def test_the_fault_spelling_is_the_option() -> None:
    assert delay_of("delay-broker=5ms") == 5.0
    assert delay_of("delay-broker=0") == 0.0
    assert delay_of("kill-worker@2") is None
    for bad in ("delay-broker", "delay-broker=fast", "delay-broker=-1ms", "delay-broker=5000ms"):
        with pytest.raises(ValueError, match="milliseconds"):
            delay_of(bad)


def _median_ping_ms(url: str, n: int = 40) -> float:
    client = redis.Redis.from_url(url)
    client.ping()  # the connection is made outside the timing
    times = []
    for _ in range(n):
        started = time.perf_counter()
        client.ping()
        times.append((time.perf_counter() - started) * 1000)
    client.close()
    return sorted(times)[n // 2]


def test_a_round_trip_through_the_proxy_takes_twice_the_delay_more(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis.log")
    server.start(dict(os.environ))
    port = free_port()
    try:
        with ProcessSet(dict(os.environ), stop_timeout=5) as procs:
            proxy = procs.start("proxy", [sys.executable, "-m", "taskbench.harness.brokers.delay_proxy", "--port", str(port),
                                          "--target", f"127.0.0.1:{server.port}", "--delay-ms", "20"],
                                tmp_path / "proxy.log")
            wait_until(lambda: listening(port), 20, what="the proxy")
            direct = _median_ping_ms(server.url)
            delayed = _median_ping_ms(behind(server.url, port))
            assert 40 <= delayed < 40 + direct + 30, (direct, delayed)  # 20 ms each way, no more than a hop
            client = redis.Redis.from_url(behind(server.url, port))
            client.set("k", "v" * 200_000)  # a value bigger than one chunk arrives whole and in order
            assert client.get("k") == b"v" * 200_000
            client.close()
            pid = proxy.pid
        assert not psutil.pid_exists(pid) and not listening(port)
    finally:
        server.stop()


@pytest.mark.slow
def test_a_run_behind_a_delay_loses_nothing_and_stops_the_proxy(out_dir: Path) -> None:
    with harness_cli(["run", "--backends", "dramatiq", "--output", str(out_dir), "--model", "open", "--rate", "100",
                      "--users", "20", "--requests", "300", "--warmup", "10", "--fault", "delay-broker=2ms"]) as proc:
        out, _ = proc.communicate(timeout=300)
    case = json.loads(next(out_dir.glob("*/result.json")).read_text())["cases"][0]
    assert proc.returncode == 0, out
    assert case["broker_delay_ms"] == 2.0 and "delay proxy: 2 ms each way" in out
    assert case["summary"]["lost"] == 0 and case["summary"]["executed_per_s"] > 0, case["summary"]
    assert "broker-delay" in case["exit_codes"] and case["exit_codes"]["broker-delay"] in (0, -15), case["exit_codes"]
