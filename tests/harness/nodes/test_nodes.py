"""``taskbench run --nodes N``: the pods of a cluster run as processes in network namespaces (root only)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from taskbench.harness.nodes.netns import Network, remove_stale, unavailable
from taskbench.results import QueueCase, load
from tests.conftest import missing
from tests.helpers import assert_one_line_error, harness_cli


@pytest.fixture
def netns() -> None:
    """Skip where network namespaces cannot be made (not root, no iproute2); fail instead under CI=true."""
    why_not = unavailable()
    if why_not is not None:
        missing(f"network namespaces: {why_not}")


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def _fail_inside(made: list[Network], left: list[subprocess.Popen[bytes]]) -> None:
    """Create two nodes, leave a process running in one, check the other's interface, then fail."""
    with Network(["a", "b"], say=lambda _: None) as net:
        made.append(net)
        # a process left running inside a node is the teardown's to kill (by its pid)
        left.append(subprocess.Popen(net.nodes["b"].exec(["sleep", "600"]), start_new_session=True))
        shown = subprocess.run(net.nodes["a"].exec(["ip", "-o", "addr", "show", "dev", "eth0"]),
                               capture_output=True, text=True, check=True).stdout
        assert net.nodes["a"].ip in shown and net.nodes["b"].ip != net.nodes["a"].ip
        raise RuntimeError("inside the block")


@pytest.mark.usefixtures("netns")
def test_a_network_is_removed_also_when_its_block_fails() -> None:
    made: list[Network] = []
    left: list[subprocess.Popen[bytes]] = []
    with pytest.raises(RuntimeError, match="inside"):
        _fail_inside(made, left)
    (net,), (sleeper,) = made, left
    assert sleeper.wait(timeout=30) != 0  # killed, not left behind
    assert net.leftovers() == []
    assert f"tb{net.tag}" not in _namespaces()


@pytest.mark.usefixtures("netns")
def test_the_network_of_a_killed_harness_is_removed_by_the_next() -> None:
    script = ("import time\nfrom taskbench.harness.nodes.netns import Network\n"
              "with Network(['x'], say=lambda _: None) as net:\n    print(net.tag, flush=True)\n    time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        assert owner.stdout is not None
        tag = owner.stdout.readline().strip()
        assert tag and f"tb{tag}-x" in _namespaces()
        os.kill(owner.pid, signal.SIGKILL)  # no teardown runs
        owner.wait(timeout=30)
        assert f"tb{tag}-x" in _namespaces()
        assert tag in remove_stale(say=lambda _: None)
        assert f"tb{tag}" not in _namespaces()
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
        assert f"tb{tag}" not in links
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=30)
        if owner.stdout is not None:
            owner.stdout.close()
        remove_stale(say=lambda _: None)


#: the cluster run's requests, split between its two drivers
REQUESTS = 600


@pytest.mark.usefixtures("netns")
def test_two_drivers_in_two_namespaces_merge_into_one_audited_case(tmp_path: Path,
                                                                    cli: Callable[..., Result]) -> None:
    output = tmp_path / "results"
    # 600 requests: 300 for each driver, 1.5 s of load, that one arq worker drains in a few seconds more
    with harness_cli(["run", "--nodes", "2", "--backends", "arq", "--model", "open", "--rate", "400",
                      "--users", "40", "--requests", str(REQUESTS), "--warmup", "50", "--output", str(output)]) as proc:
        out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 0, out
    (path,) = output.glob("*/result.json")
    result = load(path)
    (case,) = result.cases
    assert isinstance(case, QueueCase)
    assert case.status == "ok", case.failures
    assert case.audit is not None and case.load is not None and result.config is not None
    assert (case.audit.lost, case.audit.duplicated, case.audit.accepted) == (0, 0, REQUESTS)
    segments = result.config["segments"]
    assert [s["index"] for s in segments] == [0, 1]
    assert sum(s["requests"] for s in segments) == REQUESTS and all(s["ok"] > 0 for s in segments)
    assert case.load.latency.count == REQUESTS  # the merged histogram holds every request of both drivers
    nodes = result.config["nodes"]
    assert len({n["ip"] for n in nodes.values()}) == len(nodes) == 5  # redis, api, worker-0, driver-0, driver-1
    assert all(not n["ip"].startswith("127.") for n in nodes.values())
    assert not any(n["netns"] in _namespaces() for n in nodes.values())  # every namespace removed

    # the collector's log, as `kubectl logs` gives it, goes into results/<run>/ as any run's result
    log = tmp_path / "collector.log"
    log.write_text("1 driver(s) ...\nTASKBENCH-RESULT " + json.dumps(json.loads(path.read_text())) + "\n")
    again = tmp_path / "collected"
    done = cli("collect", str(log), "--output", str(again))
    assert done.exit_code == 0, done.output
    copy = load(again / result.run_id / "result.json")
    assert isinstance(copy.cases[0], QueueCase) and copy.cases[0].audit == case.audit and copy.config == result.config
    assert (again / result.run_id / "report.html").exists()


def test_collect_refuses_a_log_without_a_result(cli: Callable[..., Result], tmp_path: Path) -> None:
    log = tmp_path / "collector.log"
    log.write_text("waiting for 3 driver(s)\n")
    assert_one_line_error(cli("collect", str(log), "--output", str(tmp_path)), "no TASKBENCH-RESULT line")


def test_drive_refuses_a_remote_api_unless_told(cli: Callable[..., Result]) -> None:
    assert_one_line_error(cli("drive", "--segment", "0/2", "--url", "http://10.1.2.3:8000/api/v1/incr/io/simple/arq",
                              "--requests", "10"), "give --allow-remote")
    assert_one_line_error(cli("drive", "--segment", "2/2", "--url", "http://127.0.0.1:8000/x", "--requests", "10"),
                          "INDEX must be in [0, 1]")
