"""``taskbench drain``: one worker's drain of no-op tasks, its row per ledger mode, and nothing left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import redis

pytestmark = pytest.mark.slow


def test_drain_measures_each_ledger_mode_and_cleans_up(redis_url: str, tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    client = redis.Redis.from_url(redis_url)
    patterns = ("taskbench:drain-*", "arq:*:drain-*")
    keys_before = {k for pattern in patterns for k in client.scan_iter(match=pattern, count=1000)}
    out = subprocess.run([sys.executable, "-m", "taskbench", "drain", "--backends", "arq", "--tasks", "200",
                          "--ledger", "both", "--redis-url", redis_url, "--output", str(tmp_path),
                          "--format", "json", "--repeat", "2"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    (path,) = tmp_path.glob("drain-*/drain.json")
    rows = json.loads(path.read_text())
    assert [(r["backend"], r["round"], r["ledger"], r["executed"], r["workload"]) for r in rows] == [
        ("arq", 0, True, 200, "io/simple"), ("arq", 0, False, 200, "io/simple"),
        ("arq", 1, False, 200, "io/simple"), ("arq", 1, True, 200, "io/simple")], "the modes alternate"
    printed = json.loads(out.stdout)
    entry = printed["backends"]["arq"]
    on = (rows[0]["drain_per_s"] + rows[3]["drain_per_s"]) / 2  # the median of two
    off = (rows[1]["drain_per_s"] + rows[2]["drain_per_s"]) / 2
    assert entry["on"] == pytest.approx(on) and entry["off"] == pytest.approx(off)
    assert entry["ratio"] == pytest.approx(on / off)
    assert all(r["drain_per_s"] > 0 and r["version"] for r in rows)
    assert list(tmp_path.glob("drain-*/drain-case-arq-*.log")), "each drain-case process has its log"
    try:
        keys_after = {k for pattern in patterns for k in client.scan_iter(match=pattern, count=1000)}
        assert keys_after <= keys_before, "the drain deleted every key it made"
    finally:
        client.close()
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before, "no process left"
