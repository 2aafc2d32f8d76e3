"""A run id read from a file is held to the rule of one typed on the command line; nothing lands outside --output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from taskbench.settings import check_run_id
from tests.helpers import assert_one_line_error
from tests.report.synthetic import queue_run

#: ids that would name a folder outside --output, a hidden one, an option, or no file at all
BAD = ["/etc/x", "a/../../b", "a\x00b", "..", ".", "../up", "/proc/self/fd/1", "a\\b", "a/b", ".hidden", "-rf",
       "", "x" * 65, "tab\there", "new\nline", "é"]
GOOD = ["k8s-1a2b3c4d", "20261203T081335-4128", "manual", "run_1.2", "x" * 64]


def _collector_log(tmp_path: Path, run_id: object) -> Path:
    data = json.loads(queue_run(run_id="r").to_json())
    data["run_id"] = run_id
    log = tmp_path / "collector.log"
    log.write_text("2 driver(s) ...\nTASKBENCH-RESULT " + json.dumps(data) + "\n")
    return log


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("run_id", BAD, ids=repr)
def test_collect_refuses_a_run_id_that_is_not_one(cli: Callable[..., Result], tmp_path: Path, run_id: str) -> None:
    work = tmp_path / "work"
    (work / "results").mkdir(parents=True)
    log = _collector_log(work, run_id)
    before = _files(tmp_path)
    assert_one_line_error(cli("collect", str(log), "--output", str(work / "results")), "a run id is 1 to 64")
    assert _files(tmp_path) == before, "collect wrote a file though it refused the run id"
    assert not (tmp_path / "b").exists() and not (tmp_path / "up").exists()


@pytest.mark.parametrize("run_id", GOOD)
def test_collect_puts_a_valid_run_id_under_output(cli: Callable[..., Result], tmp_path: Path, run_id: str) -> None:
    out = tmp_path / "results"
    done = cli("collect", str(_collector_log(tmp_path, run_id)), "--output", str(out))
    assert done.exit_code == 0, done.output
    assert {p.relative_to(out).as_posix() for p in _files(out)} == \
        {f"{run_id}/result.json", f"{run_id}/report.html", "index.html"}


def test_collect_refuses_a_run_folder_that_links_out_of_output(cli: Callable[..., Result], tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "k8s-1").symlink_to(elsewhere)  # an untarred archive can carry one
    done = cli("collect", str(_collector_log(tmp_path, "k8s-1")), "--output", str(out))
    assert_one_line_error(done, "leads out of --output")
    assert not list(elsewhere.iterdir()) and not (out / "index.html").exists()


@pytest.mark.parametrize("run_id", [1234, None, ["a"]])
def test_a_run_id_that_is_not_text_is_a_result_error(cli: Callable[..., Result], tmp_path: Path,
                                                     run_id: object) -> None:
    done = cli("collect", str(_collector_log(tmp_path, run_id)), "--output", str(tmp_path / "results"))
    assert_one_line_error(done, "run_id")
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("run_id", BAD, ids=repr)
def test_a_typed_run_id_gets_the_same_answer(cli: Callable[..., Result], tmp_path: Path, run_id: str) -> None:
    with pytest.raises(ValueError, match="a run id is 1 to 64") as raised:
        check_run_id(run_id)
    assert "\n" not in str(raised.value)  # repr: a newline in the id is shown as \n
    if "\x00" in run_id:
        return  # no command line carries a NUL: the rule above is what a typed one would meet
    assert_one_line_error(cli("purge", "--run-id", run_id), "a run id is 1 to 64")
    done = cli("deploy", "k8s", "--run-id", run_id, "--out-file", str(tmp_path / "k.yaml"))
    assert_one_line_error(done, "a run id is 1 to 64")
    assert not (tmp_path / "k.yaml").exists()


@pytest.mark.parametrize("run_id", ["run_1.", "a_", "x" * 64])
def test_a_deploy_run_id_is_a_kubernetes_label_value_too(cli: Callable[..., Result], tmp_path: Path,
                                                         run_id: str) -> None:
    # a valid run id that app.kubernetes.io/instance cannot carry: one line, no manifest
    done = cli("deploy", "k8s", "--run-id", run_id, "--out-file", str(tmp_path / "k.yaml"))
    assert_one_line_error(done, "a Kubernetes label value")
    assert not (tmp_path / "k.yaml").exists()
    done = cli("deploy", "k8s", "--run-id", "k8s-run_1.2", "--out-file", str(tmp_path / "k.yaml"))
    assert done.exit_code == 0, done.output
    assert 'app.kubernetes.io/instance: "k8s-run_1.2"' in (tmp_path / "k.yaml").read_text()
