"""The result model: files of the previous schema still render, a broken file is one clear error,
and one rule decides whether a case passed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskbench.cli import app
from taskbench.results import (
    SCHEMA_VERSION,
    CeleryCase,
    FaultRecord,
    HttpCase,
    QueueCase,
    Result,
    ResultFormatError,
    Summary,
    load,
    parse,
    passed,
)

SAMPLES = Path(__file__).parent / "samples"
V1 = sorted(SAMPLES.glob("v1-*.json"))


def test_the_committed_samples_cover_every_kind_of_result() -> None:
    kinds = {json.loads(p.read_text()).get("scenario", {}).get("kind", "run") for p in V1}
    assert kinds == {"run", "queue", "http", "celery"}


@pytest.mark.parametrize("path", V1, ids=lambda p: p.stem)
def test_a_schema_1_file_upgrades_without_losing_a_figure(path: Path) -> None:
    raw = json.loads(path.read_text())
    result = load(path)
    assert result.schema_version == SCHEMA_VERSION
    assert result.run_id == raw["run_id"] and len(result.cases) == len(raw["cases"])
    for old, new in zip(raw["cases"], result.cases, strict=True):
        assert new.status == old["status"] and new.failures == old.get("failures", [])
        for key, value in old["summary"].items():
            if key in Summary.model_fields:
                assert new.summary.figure(key) == value, key
        if old["summary"].get("runs"):
            spread = new.summary.spread
            assert spread is not None and spread.runs == old["summary"]["runs"]
            assert (spread.min, spread.max) == (old["summary"]["rps_min"], old["summary"]["rps_max"])
    # and written back in the current schema, it reads the same
    again = parse(json.loads(result.to_json()))
    assert again == result


@pytest.mark.parametrize("path", V1, ids=lambda p: p.stem)
@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_taskbench_report_renders_a_schema_1_file(path: Path, fmt: str) -> None:
    is_run = "scenario" not in json.loads(path.read_text())
    out = CliRunner().invoke(app, ["report", str(path), "--format", fmt])
    if fmt == "markdown" and is_run:
        assert out.exit_code == 2 and "renders scenario results" in out.output
        return
    assert out.exit_code == 0, out.output
    if fmt == "json":
        assert json.loads(out.output)["schema_version"] == SCHEMA_VERSION
    else:
        first = load(path).cases[0]
        assert first.name.split()[0] in out.output  # a narrow terminal wraps the label


def test_a_run_sample_shows_its_fault_line() -> None:
    out = CliRunner().invoke(app, ["report", str(SAMPLES / "v1-run-fault.json")])
    assert "fault kill-worker@0.4: not injected (background has no worker process to kill)" in out.output
    assert "arq: fault kill-worker@0.4: worker-0 (pid" in out.output


def test_broken_files_are_one_clear_error(tmp_path: Path) -> None:
    cases = {
        "not-json.json": ("{", "is not JSON (line 1"),
        "list.json": ("[]", "not a JSON object"),
        "no-schema.json": ('{"cases": []}', "no schema version"),
        "newer.json": ('{"schema_version": 99}', "newer taskbench (schema 99)"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ResultFormatError, match=re.escape(message)):
            load(path)
        out = CliRunner().invoke(app, ["report", str(path)])
        assert out.exit_code == 2 and message in out.output and "Traceback" not in out.output
    with pytest.raises(ResultFormatError, match="cannot read"):
        load(tmp_path / "absent.json")


def test_a_renamed_figure_fails_where_it_is_written() -> None:
    data = json.loads((SAMPLES / "v1-run-fault.json").read_text())
    data["cases"][0]["summary"]["rsp"] = 1.0
    with pytest.raises(ResultFormatError, match=r"cases\.0\.queue\.summary\.rsp"):
        parse(data)
    with pytest.raises(ValueError, match="rsp"):
        Summary(rsp=1.0)  # type: ignore[call-arg]
    with pytest.raises(KeyError, match="no figure 'rsp'"):
        Summary().figure("rsp")


def test_one_rule_for_passed() -> None:
    injected = FaultRecord(fault="kill-api@1", target="api", injected=True)
    rows = [
        (QueueCase(backend="arq", status="ok"), True),
        (QueueCase(backend="arq", status="failed"), False),
        (QueueCase(backend="arq", status="errors"), False),  # a plain run: failed requests fail it
        (QueueCase(backend="arq", status="errors", fault=injected), True),  # the fault's cost
        (QueueCase(backend="arq", status="errors", index=0), True),  # a scenario measures errors
        (QueueCase(backend="arq", status="failed", index=0, fault=injected), False),
        # a worker that died on its own and was started again (--restart-workers): its redeliveries are figures
        (QueueCase(backend="arq", status="errors", revived=["worker-0 (pid 1) exited on its own"]), True),
        (QueueCase(backend="arq", status="failed", revived=["worker-0 (pid 1) exited on its own"]), False),
        (HttpCase(status="errors", index=3), True),
        (CeleryCase(status="failed", index=1), False),
    ]
    for case, expected in rows:
        assert passed(case) is expected, case
    result = Result(kind="run", run_id="r", created="now", cases=[rows[0][0], rows[2][0]])
    assert not result.passed()


def test_the_run_table_and_json_carry_the_queue_categories(tmp_path: Path) -> None:
    old = load(SAMPLES / "v1-run-fault.json")
    assert all(c.audit is None or c.audit.categories.attempted == 0 for c in old.cases)  # schema 1: zeros
    case = next(c for c in old.cases if isinstance(c, QueueCase) and c.audit is not None)
    assert case.audit is not None
    case.audit.categories = case.audit.categories.model_copy(update={
        "attempted": 10, "ok": 7, "lost": 1, "duplicated": 1, "unexpected": 2, "recovered": 2,
        "ok_frac": 0.7, "lost_frac": 0.1, "duplicated_frac": 0.1, "unexpected_frac": 0.2})
    case.summary.unexpected = 2
    path = tmp_path / "result.json"
    path.write_text(old.to_json())
    out = CliRunner().invoke(app, ["report", str(path)])
    assert out.exit_code == 0, out.output
    assert "unexp" in out.output
    text = " ".join(out.output.split())  # however the console wrapped it
    assert (f"{case.backend}: of 10 sent: ok 7 (70.00 %), lost 1 (10.00 %), duplicated 1 (10.00 %), "
            "unexpected 2 (20.00 %); 2 of the unexpected after a non-2xx or no answer") in text
    as_json = json.loads(CliRunner().invoke(app, ["report", str(path), "--format", "json"]).output)
    cats = next(c for c in as_json["cases"] if c.get("audit"))["audit"]["categories"]
    assert {k: cats[k] for k in ("ok", "lost", "duplicated", "unexpected")} == {
        "ok": 7, "lost": 1, "duplicated": 1, "unexpected": 2}
