"""The scenario table's figures: plateau RPS under a ramp, the CPU limited components used, the machine."""

from __future__ import annotations

from taskbench.harness.machine import cpu_calibration, machine_info
from taskbench.report.scenario import limits_summary, machine_line, markdown
from taskbench.results import FaultRecord, HttpCase, LimitRecord, LimitStats, QueueCase, Result, ScenarioInfo, Summary
from taskbench.scenarios.http import peak_rps


def _scenario(kind: str, cases: list, machine: dict | None = None) -> Result:  # type: ignore[type-arg]
    info = ScenarioInfo(name="t", description="d", kind=kind, file="t.toml")  # type: ignore[arg-type]
    return Result(kind="scenario", run_id="r", created="now", scenario=info, cases=cases,
                  machine=machine or {})  # type: ignore[arg-type]


def test_peak_rps_is_the_best_three_second_plateau() -> None:
    ramp = [{"t": t, "ok": ok, "completed": ok + 1} for t, ok in enumerate([10, 50, 300, 690, 700, 710, 400])]
    assert peak_rps(ramp) == 700.0
    assert peak_rps([{"t": 0, "ok": 4}, {"t": 1, "ok": 6}]) == 5.0  # shorter than the window: the mean
    assert peak_rps([]) is None


def test_limits_summary_prefers_the_cpu_used_under_load() -> None:
    case = QueueCase(backend="arq", limits={
        "api": LimitRecord(component="api", method="cgroup-v1", load_cpu=0.198,
                           stats=LimitStats(cpu_s=1.0, wall_s=10.0)),
        "worker-0": LimitRecord(component="worker-0", method="cgroup-v1", stats=LimitStats(cpu_s=1.5, wall_s=10.0)),
    })
    assert limits_summary(case) == "cgroup-v1; CPU used under load: api 0.20, worker-0 0.15"
    pinned = HttpCase(limits={"server": LimitRecord(component="server", method="pinning")})
    assert limits_summary(pinned) == "pinning"
    assert limits_summary(HttpCase()) == "–"


def test_the_machine_line_carries_the_one_core_speed() -> None:
    calibration = cpu_calibration(iterations=20_000, rounds=2)
    assert calibration["task"] == "crunch(20000)" and calibration["best_of"] == 2
    assert calibration["cpu_ms"] > 0
    info = machine_info()
    assert info["cpu_calibration"]["cpu_ms"] > 0
    case = HttpCase(label="hello", summary=Summary(rps=10.0, peak_rps=12.0, driver_cpu_pct=3.0),
                    article={"peak_rps": 15.0}, status="ok")
    result = _scenario("http", [case], info)
    line = machine_line(result)
    assert f"{info['logical_cpus']} CPUs" in line and "one core runs crunch(1000000) in" in line
    table = markdown(result)
    assert "| hello | 10 | 12 (15) |" in table
    case.summary.rps = 0.4
    assert "| hello | 0.4 | 12 (15) |" in markdown(result), "a rate below 10 keeps its decimal"
    assert table.rstrip().endswith(line)


def test_repeated_runs_keep_the_median_run_and_add_up_losses() -> None:
    from taskbench.report.scenario import spread
    from taskbench.scenarios.run import combine_runs

    runs = [QueueCase(backend="arq", summary=Summary(rps=rps, lost=lost, duplicated=0), status=status,
                      failures=fail)
            for rps, lost, status, fail in [(900.0, 0, "ok", []), (850.0, 1, "failed", ["1 lost"]),
                                            (910.0, 0, "ok", [])]]
    one = combine_runs(runs, "rps")
    assert one.summary.rps == 900.0  # the median run is the row
    assert one.summary.spread is not None
    assert (one.summary.spread.min, one.summary.spread.max, one.summary.spread.runs) == (850.0, 910.0, 3)
    assert one.summary.lost == 1 and one.status == "failed" and one.failures == ["1 lost"]
    assert [r.summary.rps for r in one.repeats] == [900.0, 850.0, 910.0]
    assert spread(one.summary) == "3: 850–910"
    assert runs[1].summary.spread is None, "the runs themselves are not changed"
    assert combine_runs(runs[:1], "rps") is runs[0]
    assert spread(runs[0].summary) == ""


def test_a_ramp_prints_rps_against_users_without_the_drain() -> None:
    from taskbench.report.scenario import series_lines
    from taskbench.results import SeriesPoint

    series = [SeriesPoint(t=t, users=min(1000, 100 * (t + 1)), rps=min(700, 100 * (t + 1)), errors=0)
              for t in range(14)]
    series += [SeriesPoint(t=14, users=400, rps=900, errors=0)]  # the drain after the load: not the ramp
    result = _scenario("http", [HttpCase(label="def", params={"model": "ramp"}, series=series),
                                HttpCase(label="closed", params={"model": "closed"}, series=series)])
    (line,) = series_lines(result, points=4)
    assert line.startswith("def, users→RPS along the ramp: 100→100, ")
    assert "1000→700" in line and "900" not in line


def test_fault_cases_get_recovery_columns_and_a_line() -> None:
    from taskbench.report.table import fault_line

    fault = FaultRecord(fault="kill-worker@2", target="worker-0", injected=True, killed_pid=41,
                        ready_after_s=1.25, accepting_again_s=0.0, executing_again_s=None)
    summary = Summary(rps=900.0, lost=0, duplicated=2, fault="kill-worker@2", restart_ready_s=1.25,
                      accepting_again_s=0.0, executing_again_s=None, first_execution_s=1.31, executing_90_s=None,
                      throughput_ratio=None)
    result = _scenario("queue", [QueueCase(backend="saq", label="saq, kill-worker@2", summary=summary,
                                           status="failed")])
    table = markdown(result)
    assert ("restarted, ready in s | accepting again in s | first run after s | executing again in s | "
            "90 % again in s | after/ before") in table
    assert "| 1.2 | 0.0 | 1.3 | – | – | – |" in table
    plain = _scenario("queue", [QueueCase(backend="saq", label="saq", summary=Summary(rps=900.0), status="ok")])
    assert "restarted" not in markdown(plain), "no fault, no fault columns"
    line = fault_line(fault)
    assert line.startswith("fault kill-worker@2: worker-0 (pid 41) killed; restarted and ready after 1.25 s")
    assert "executed after never" in line
    skipped = fault_line(FaultRecord(fault="kill-worker@2", note="background has no worker"))
    assert skipped == "fault kill-worker@2: not injected (background has no worker)"


def test_repeated_runs_add_up_the_extra_executions() -> None:
    from taskbench.scenarios.run import combine_runs

    runs = [QueueCase(backend="faststream-pubsub", unsafe="broadcast", status="errors",
                      summary=Summary(rps=rps, accepted=n, duplicated=n, extra_executions=4 * n))
            for rps, n in [(170.0, 500), (180.0, 600), (160.0, 400)]]
    one = combine_runs(runs, "rps")
    assert one.summary.extra_executions == 4 * 1500  # every run's copies, like lost and duplicated
    assert one.status == "errors" and one.errors_expected
