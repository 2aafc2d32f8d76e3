"""Every file the CLI reads or writes, and every number a gate compares: one line of error, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result as CliResult

from tests.helpers import assert_one_line_error
from tests.report.synthetic import queue_run

Cli = Callable[..., CliResult]


def _bad_files(folder: Path) -> dict[str, Path]:
    """A result that is not UTF-8, one nested 100,000 deep, hand-edited figures no run can measure."""
    folder.mkdir(parents=True, exist_ok=True)
    good = json.loads(queue_run(run_id="good").to_json())
    files = {"latin1": folder / "latin1.json", "deep": folder / "deep.json", "negative": folder / "negative.json",
             "nan": folder / "nan.json", "inf": folder / "inf.json", "audit": folder / "audit.json"}
    files["latin1"].write_bytes(queue_run().to_json().replace('"run"', '"r\xe9sum\xe9"', 1).encode("latin-1"))
    files["deep"].write_text("[" * 100_000 + "]" * 100_000)
    negative = json.loads(json.dumps(good))
    negative["cases"][0]["summary"]["lost"] = -3
    files["negative"].write_text(json.dumps(negative))
    files["nan"].write_text(json.dumps(good).replace('"rps": ', '"rps": NaN, "x_rps": ', 1))
    files["inf"].write_text(json.dumps(good).replace('"p95_ms": ', '"p95_ms": 1e999, "x_p95": ', 1))
    audit = json.loads(json.dumps(good))
    audit["cases"][0]["audit"]["duplicated"] = -1
    files["audit"].write_text(json.dumps(audit))
    return files


@pytest.mark.parametrize(("which", "message"), [
    ("latin1", "is not UTF-8 text"),
    ("deep", "nested too deep"),
    ("negative", "summary: lost must not be negative, got -3"),
    ("nan", "cases.0.summary.rps: not a finite number (nan)"),
    ("inf", "cases.0.summary.p95_ms: not a finite number (inf)"),
    ("audit", "audit: duplicated must not be negative, got -1"),
])
def test_report_and_compare_reject_a_bad_file_in_one_line(which: str, message: str, tmp_path: Path,
                                                          cli: Cli) -> None:
    bad = _bad_files(tmp_path)[which]
    good = tmp_path / "good.json"
    good.write_text(queue_run().to_json())
    assert_one_line_error(cli("report", str(bad)), message)
    assert_one_line_error(cli("report", str(bad), "--format", "html"), message)
    assert_one_line_error(cli("compare", str(good), str(bad)), message)
    assert_one_line_error(cli("compare", str(bad), str(good)), message)


def test_the_index_skips_a_bad_file_naming_it_and_lists_the_rest(tmp_path: Path) -> None:
    for name, path in _bad_files(tmp_path / "bad").items():
        (tmp_path / name).mkdir()
        path.rename(tmp_path / name / "result.json")
    (tmp_path / "fine").mkdir()
    (tmp_path / "fine" / "result.json").write_text(queue_run(run_id="fine").to_json())
    out = subprocess.run([sys.executable, "-m", "taskbench", "report", "--index", "--output", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert f"skipped {tmp_path / 'latin1' / 'result.json'} is not UTF-8 text" in out.stderr
    for name in ("deep", "negative", "nan", "inf", "audit"):
        assert str(tmp_path / name / "result.json") in out.stderr
    page = (tmp_path / "index.html").read_text()
    assert 'href="fine/result.json"' in page and "is not UTF-8" in page


@pytest.mark.parametrize(("threshold", "message"), [
    ("nan%", "a percentage such as 5 or 5%"), ("inf%", "a percentage such as 5 or 5%"),
    ("-1%", "from 0% to below 100%"), ("100%", "from 0% to below 100%"), ("100", "from 0% to below 100%"),
    ("nan", "a percentage such as 5 or 5%"), ("five%", "a percentage such as 5 or 5%"),
])
def test_a_threshold_that_could_switch_the_gate_off_is_refused(threshold: str, message: str, tmp_path: Path,
                                                                 cli: Cli) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(queue_run(seed=1).to_json())
    b.write_text(queue_run(seed=2, latency_ms=40).to_json())
    assert_one_line_error(cli("compare", str(a), str(b), "--threshold", threshold), message)


def test_a_threshold_is_a_percentage_and_alpha_must_be_a_number(tmp_path: Path, cli: Cli) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(queue_run(seed=1).to_json())
    b.write_text(queue_run(seed=2, latency_ms=40).to_json())
    assert cli("compare", str(a), str(b), "--threshold", "0.5%").exit_code == 1
    assert cli("compare", str(a), str(b), "--threshold", "0.5").exit_code == 1  # a bare number is percent too
    assert cli("compare", str(a), str(b), "--threshold", "99%").exit_code == 0  # +33 % latency is below 99 %
    assert cli("compare", str(a), str(b), "--threshold", "99").exit_code == 0
    nan_alpha = cli("compare", str(a), str(b), "--alpha", "nan")
    assert nan_alpha.exit_code == 2 and "between 1e-06 and 0.5" in nan_alpha.output


def test_the_library_refuses_a_threshold_that_passes_everything() -> None:
    from taskbench.report.compare import compare

    run = queue_run()
    for bad in (float("nan"), float("inf"), -0.1, 1.0):
        with pytest.raises(ValueError, match="threshold"):
            compare(run, run, threshold=bad)
    with pytest.raises(ValueError, match="alpha"):
        compare(run, run, alpha=float("nan"))


def test_a_read_only_output_is_one_line(tmp_path: Path, cli: Cli) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    # root writes into a folder of mode 0500; nobody writes under /proc
    target = Path("/proc/1/taskbench") if os.geteuid() == 0 else folder / "results"
    assert_one_line_error(cli("run", "--output", str(target), "--requests", "10"), "cannot write there")
    assert_one_line_error(cli("report", "--index", "--output", str(target.parent)), "cannot write")


def test_an_output_that_cannot_be_written_is_one_line_before_anything_starts(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "file").write_text("in the way")
    for args in (["run", "--requests", "10"], ["run", "--scenario", "backends"], ["ceiling"], ["drain"],
                 ["overhead"]):
        out = cli(*args, "--output", str(tmp_path / "file" / "results"))
        assert_one_line_error(out, f"--output {tmp_path / 'file' / 'results'}: cannot write there")
    good = tmp_path / "good.json"
    good.write_text(queue_run().to_json())
    assert_one_line_error(cli("report", str(good), "--format", "html", "--out-file",
                              str(tmp_path / "file" / "r.html")), "cannot write")
    assert_one_line_error(cli("compare", str(good), str(good), "--format", "html", "--out-file",
                              str(tmp_path / "file" / "c.html")), "cannot write")
    assert_one_line_error(cli("report", "--index", "--output", str(tmp_path / "file")), "is not a folder")


@pytest.mark.parametrize(("url", "message"), [
    ("http://127.0.0.1:1/", "http://127.0.0.1:1/ is not a Redis URL"),
    ("127.0.0.1:6379", "127.0.0.1:6379 is not a Redis URL"),
    ("redis://:hunter2@127.0.0.1:99999/0", "redis://:***@127.0.0.1:99999/0 is not a Redis URL"),
    ("unix:///nonexistent/redis.sock", "cannot reach Redis at socket /nonexistent/redis.sock"),
])
def test_a_redis_url_that_is_not_one_is_one_line_naming_it(url: str, message: str, tmp_path: Path,
                                                           cli: Cli) -> None:
    out = cli("run", "--backends", "background", "--requests", "10", "--redis-url", url,
              "--output", str(tmp_path / "results"))
    assert_one_line_error(out, message)
    assert "hunter2" not in out.output


def test_a_file_that_never_ends_or_is_no_file_is_one_line(tmp_path: Path, cli: Cli) -> None:
    good = tmp_path / "good.json"
    good.write_text(queue_run().to_json())
    assert_one_line_error(cli("report", "/dev/zero"), "cannot read /dev/zero: not a regular file")
    assert_one_line_error(cli("compare", str(good), "/dev/zero"), "not a regular file")
    assert_one_line_error(cli("report", str(tmp_path)), f"cannot read {tmp_path}: Is a directory")
    assert_one_line_error(cli("report", str(tmp_path / "missing.json")), "No such file or directory")


@pytest.mark.parametrize(("version", "message"), [
    (True, "schema version true: a whole number from 1 to"),
    (False, "schema version false"),
    (-1, "schema version -1"),
    (0, "schema version 0"),
    ("2", 'schema version "2"'),
    (2.0, "schema version 2.0"),
    ([2], "schema version [2]"),
    ({"v": 2}, 'schema version {"v": 2}'),
    (None, "no schema version"),
    (99, "written by a newer taskbench (schema 99)"),
])
def test_a_schema_version_that_is_no_whole_number_from_one_is_refused(version: object, message: str,
                                                                      tmp_path: Path, cli: Cli) -> None:
    data = json.loads(queue_run().to_json())
    data["schema_version"] = version
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(json.dumps(data))
    good.write_text(queue_run().to_json())
    assert_one_line_error(cli("report", str(bad)), message)
    assert_one_line_error(cli("compare", str(good), str(bad)), message)


#: what a crafted result could send a terminal: a new title, a cleared screen, colour, a C1 CSI, a bell
ESCAPES = ("\x1b]0;owned\x07", "\x1b[2J", "\x1b[31m", "\x9b6n", "\x07", "\x08\x08", "\r", "\x7f", "\x00")


def _crafted(folder: Path, name: str) -> Path:
    data = json.loads(queue_run().to_json())
    trail = "".join(ESCAPES)
    data["command"] = ["taskbench", "run" + trail]
    data["cases"][0]["label"] = "arq" + trail
    data["cases"][0]["failures"] = ["failed" + trail]
    data["cases"][0]["status"] = "failed"
    path = folder / name / "result.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    return path


def _raw(out: CliResult) -> list[str]:
    text = out.stdout + out.stderr
    return [escape for escape in ESCAPES if escape.strip("\x1b\x9b") and escape in text] + \
        [char for char in "\x1b\x9b\x07\x08\r\x7f\x00" if char in text]


def test_a_crafted_results_control_characters_never_reach_the_terminal_raw(tmp_path: Path, cli: Cli) -> None:
    first, second = _crafted(tmp_path, "first"), _crafted(tmp_path, "second")
    for args in (["report", str(first)], ["report", str(first), "--format", "json"],
                 ["compare", str(first), str(second)], ["compare", str(first), str(second), "--format", "json"],
                 ["compare", str(first), "--fail-if", "lost >= 0"]):
        out = cli(*args)
        assert out.exit_code in (0, 1), (args, out.output)
        assert not _raw(out), (args, _raw(out))
    shown = cli("report", str(first)).stdout
    assert "failed\\x1b]0;owned\\x07" in shown  # written out, so the reader sees what the file holds
    assert json.loads(cli("report", str(first), "--format", "json").stdout)["cases"][0]["label"].startswith("arq\x1b")
