"""What a user writes stays text and stays under --output: scenario names, labels, descriptions, folders."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result as CliResult

from taskbench.scenarios import ScenarioError, load
from taskbench.scenarios.parse import RUN_ID_MAX, RUN_ID_STAMP
from tests.helpers import assert_one_line_error
from tests.report.synthetic import queue_run

Cli = Callable[..., CliResult]

MARKUP = "oops [/] [bold]x[/bold] [link=file:///etc]y"


def _scenario_file(folder: Path, name: str, *, label: str = "{backend}", backend: str = "background") -> Path:
    path = folder / "mine.toml"
    path.write_text(textwrap.dedent(f"""\
        description = "mine"
        kind = "queue"
        name = {json.dumps(name)}

        [defaults]
        workload = "io/simple"
        requests = 20
        label = {json.dumps(label)}

        [matrix]
        backend = ["{backend}"]
        """))
    return path


@pytest.mark.parametrize("name", ["../../escaped-dir", "a/b", "..", ".hidden", "my scenario", "tab\tname", "",
                                  "naïve", "x" * 60])
def test_a_name_that_would_leave_output_or_break_a_run_id_is_refused_at_its_line(
        name: str, tmp_path: Path, cli: Cli) -> None:
    work = tmp_path / "deep" / "er"
    work.mkdir(parents=True)
    path = _scenario_file(work, name)
    out = cli("run", "--scenario", str(path), "--output", str(work / "results"))
    assert_one_line_error(out, f"{path}:3: ")
    assert "name" in out.stderr
    assert not (work / "results").exists(), "refused before anything started"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["deep", "er", "mine.toml"]


def test_the_longest_name_is_what_the_longest_run_id_leaves(tmp_path: Path) -> None:
    backend = "faststream-pubsub"  # the longest backend name: run id <name>-<stamp>-<pid>-0-faststream-pubsub
    longest = RUN_ID_MAX - RUN_ID_STAMP - len(f"-0-{backend}")
    assert load(_scenario_file(tmp_path, "n" * longest, backend=backend)).name == "n" * longest
    with pytest.raises(ScenarioError, match=f"mine.toml:3: name 'n{{{longest + 1}}}' is {longest + 1} characters; "
                                            f"at most {longest}"):
        load(_scenario_file(tmp_path, "n" * (longest + 1), backend=backend))
    roomier = RUN_ID_MAX - RUN_ID_STAMP - len("-0-arq")
    assert load(_scenario_file(tmp_path, "n" * roomier, backend="arq")).name == "n" * roomier


def test_a_scenario_file_that_is_not_utf8_is_one_line_with_its_line(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes('name = "t"\ndescription = "caf\xe9"\nkind = "queue"\n'.encode("latin-1"))
    assert_one_line_error(cli("run", "--scenario", str(path)), f"{path}:2: not UTF-8 text")


def _markup_scenario_result() -> str:
    """A scenario's result whose every user string is rich markup that would not render."""
    run = json.loads(queue_run(fault=True).to_json())
    case = run["cases"][0]
    case.update(index=0, label=MARKUP, failures=[MARKUP], params={"label": MARKUP})
    case["summary"]["driver_saturated"] = True
    case["load"]["saturation_reason"] = MARKUP
    run.update(kind="scenario", config=None, run_id="x[/]", scenario={
        "name": "s[/]", "description": MARKUP, "kind": "queue", "file": "[/].toml",
        "article": {"source": MARKUP, "setup": MARKUP}})
    run["machine"]["cpu_model"] = MARKUP
    return json.dumps(run)


def test_report_prints_every_string_of_a_result_as_text(tmp_path: Path, cli: Cli) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(_markup_scenario_result())
    run = json.loads(queue_run(fault=True).to_json())
    run["run_id"] = "[/]"
    run["config"]["workload"] = MARKUP
    run["cases"][0].update(backend="arq[/]", failures=[MARKUP], durable=False, durability=MARKUP)
    run["cases"][0]["fault"]["note"] = MARKUP
    plain = tmp_path / "run.json"
    plain.write_text(json.dumps(run))
    for path in (scenario, plain):
        for fmt in ("table", "markdown", "html"):
            if fmt == "markdown" and path == plain:
                continue
            out = cli("report", str(path), "--format", fmt)
            assert out.exit_code == 0, (path, fmt, out.output, out.exception)
            if fmt == "table":
                assert MARKUP in out.output.replace("\n", "") or "oops [/]" in out.output, out.output


def test_compare_prints_folder_names_and_labels_as_text(tmp_path: Path, cli: Cli) -> None:
    for name in ("[red]a", "[bold]b"):  # a folder name cannot hold the "/" of a closing tag; the labels do
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(_markup_scenario_result())
    out = cli("compare", str(tmp_path / "[red]a" / "result.json"), str(tmp_path / "[bold]b" / "result.json"))
    assert out.exit_code == 0, (out.output, out.exception)
    assert "[bold]b against [red]a" in out.output and "oops [/]" in out.output
