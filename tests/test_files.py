"""Every file taskbench writes is replaced atomically and never written through a link planted at its name."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from taskbench.files import write_atomic
from tests.report.synthetic import queue_run

#: the names the commands write: run and collect, report, report --index, compare, choose, deploy k8s, drain
NAMES = ["result.json", "report.html", "index.html", "compare.html", "choose.json", "choose.html",
         "taskbench-k8s-1.yaml", "drain.json", "parity.json"]
PRECIOUS = "a file the link points at: never overwritten\n"


def _plant(folder: Path, name: str) -> Path:
    """A link at ``folder/name`` to a file outside the folder, as an untarred archive can carry one."""
    victim = folder.parent / f"victim-{folder.name}-{name}"
    victim.write_text(PRECIOUS)
    (folder / name).symlink_to(victim)
    return victim


def _replaced(path: Path, victim: Path) -> None:
    assert victim.read_text() == PRECIOUS, f"{victim} was written through the link {path}"
    assert not path.is_symlink() and path.is_file(), f"{path} is still the planted link"
    left = [p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]
    assert not left, f"temporary files left: {left}"


@pytest.mark.parametrize("name", NAMES)
def test_a_planted_link_is_replaced_and_its_target_left_alone(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    victim = _plant(folder, name)
    write_atomic(folder / name, "new\n")
    _replaced(folder / name, victim)
    assert (folder / name).read_text() == "new\n"


def test_a_link_at_any_temporary_name_the_old_writers_used_is_never_followed(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    victims = [_plant(folder, name) for name in ("result.tmp", "index.tmp", ".index.html.tmp", "report.tmp")]
    write_atomic(folder / "result.json", "{}")
    write_atomic(folder / "index.html", "<html></html>")
    assert all(v.read_text() == PRECIOUS for v in victims)
    assert (folder / "result.json").read_text() == "{}"


def test_a_folder_in_the_way_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "report.html").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path / "report.html", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_the_mode_is_the_one_asked_under_the_umask(tmp_path: Path) -> None:
    secret = write_atomic(tmp_path / "taskbench-k8s-1.yaml", "kind: Secret\n", mode=0o600)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    umask = os.umask(0o022)
    os.umask(umask)
    page = write_atomic(tmp_path / "report.html", b"<html></html>")
    assert stat.S_IMODE(page.stat().st_mode) == 0o666 & ~umask


def _results(tmp_path: Path, run_id: str = "r1") -> Path:
    folder = tmp_path / "results" / run_id
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(queue_run(run_id=run_id).to_json())
    return folder


def test_report_writes_no_page_through_a_planted_link(cli: Callable[..., Result], tmp_path: Path) -> None:
    folder = _results(tmp_path)
    victim = _plant(folder, "report.html")
    done = cli("report", str(folder / "result.json"), "--format", "html")
    assert done.exit_code == 0, done.output
    _replaced(folder / "report.html", victim)
    out = _plant(tmp_path, "page.html")
    done = cli("report", str(folder / "result.json"), "--format", "html", "--out-file", str(tmp_path / "page.html"))
    assert done.exit_code == 0, done.output
    _replaced(tmp_path / "page.html", out)


def test_report_index_writes_no_index_through_a_planted_link(cli: Callable[..., Result], tmp_path: Path) -> None:
    folder = _results(tmp_path)
    victims = [_plant(folder.parent, name) for name in ("index.html", "index.tmp")]
    done = cli("report", "--index", "--output", str(folder.parent))
    assert done.exit_code == 0, done.output
    _replaced(folder.parent / "index.html", victims[0])
    assert victims[1].read_text() == PRECIOUS


def test_compare_writes_no_page_through_a_planted_link(cli: Callable[..., Result], tmp_path: Path) -> None:
    result = _results(tmp_path) / "result.json"
    victim = _plant(tmp_path, "compare.html")
    done = cli("compare", str(result), str(result), "--format", "html", "--out-file", str(tmp_path / "compare.html"))
    assert done.exit_code == 0, done.output
    _replaced(tmp_path / "compare.html", victim)


def test_collect_writes_no_file_through_a_planted_link(cli: Callable[..., Result], tmp_path: Path) -> None:
    out = tmp_path / "results"
    folder = out / "k8s-1"
    folder.mkdir(parents=True)
    victims = {name: _plant(folder, name) for name in ("result.json", "report.html", "result.tmp")}
    victims["index.html"] = _plant(out, "index.html")
    log = tmp_path / "collector.log"
    log.write_text("TASKBENCH-RESULT " + json.dumps(json.loads(queue_run(run_id="k8s-1").to_json())) + "\n")
    done = cli("collect", str(log), "--output", str(out))
    assert done.exit_code == 0, done.output
    for name in ("result.json", "report.html"):
        _replaced(folder / name, victims[name])
    _replaced(out / "index.html", victims["index.html"])
    assert victims["result.tmp"].read_text() == PRECIOUS


def test_deploy_writes_no_manifest_through_a_planted_link(cli: Callable[..., Result], tmp_path: Path) -> None:
    victim = _plant(tmp_path, "taskbench-k8s-1.yaml")
    done = cli("deploy", "k8s", "--run-id", "k8s-1", "--out-file", str(tmp_path / "taskbench-k8s-1.yaml"))
    assert done.exit_code == 0, done.output
    _replaced(tmp_path / "taskbench-k8s-1.yaml", victim)
    assert stat.S_IMODE((tmp_path / "taskbench-k8s-1.yaml").stat().st_mode) == 0o600  # it holds the Secret
