"""The generated pages: current in the repository, stale ones named by the check, the same on every machine."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from taskbench import backends
from taskbench.cli import app
from taskbench.cli import docs as pages
from taskbench.cli.docs import promises, reference
from taskbench.cli.docs.markdown import cell
from taskbench.cli.run_options import SIGNATURE


def test_the_committed_pages_are_current() -> None:
    out = subprocess.run([sys.executable, "-m", "taskbench.docs", "--check"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr


def test_the_check_names_a_stale_page_and_a_rewrite_makes_it_current(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(pages, "DOCS", tmp_path)
    (tmp_path / "reference.md").write_text(reference.render().replace("--workers", "--worker"))
    (tmp_path / "promises.md").write_text(promises.render())
    assert pages.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'reference.md'} is out of date" in err and "promises.md" not in err
    assert pages.main([]) == 0
    assert pages.main(["--check"]) == 0
    assert (tmp_path / "reference.md").read_text() == reference.render()


def test_a_page_holds_no_machine_fact() -> None:
    for render in pages.PAGES.values():
        text = render()
        assert text == render()
        assert str(Path.home()) not in text and str(pages.DOCS.parent) not in text
        assert socket.gethostname() not in text


def test_the_reference_has_every_users_command_and_every_option_of_run() -> None:
    text = reference.render()
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    shown = {name for name, command in group.commands.items() if not command.hidden} | set(reference.ONE_LAYER)
    for name in shown - {"deploy"}:
        assert f"## `taskbench {name}`" in text
    assert "## `taskbench deploy k8s`" in text
    assert "## `taskbench serve`" not in text and "| `taskbench serve` |" in text  # internal: one line
    run = text.split("## `taskbench run`")[1].split("\n## ")[0]
    for parameter in SIGNATURE.parameters.values():
        given = parameter.annotation.__metadata__[0].default  # typer's first declaration: --with, --path
        flag = given if isinstance(given, str) and given.startswith("--") else "--" + parameter.name.replace("_", "-")
        assert f"| `{flag}`" in run, parameter.name
    assert "### Faults and brokers" in run and "| `--concurrency`, `-c` | int 1..10000 | `10` |" in run


def test_the_reference_has_every_librarys_settings() -> None:
    text = reference.render()
    for library, model in backends.libraries().items():
        for key in model.model_fields:
            assert f"| `{library}.{key}` |" in text


def test_the_promises_page_has_every_backend_on_every_broker_with_each_bound() -> None:
    text = promises.render()
    for meta in backends.REGISTRY.values():
        section = text.split(f"## `{meta.name}`\n")[1].split("\n## ")[0]
        for broker in meta.brokers:
            delivery = meta.delivery_on(broker)
            assert f"| {broker} |" in section and delivery.guarantee in section
            for bound in delivery.all_bounds():
                assert cell(bound.source) in section
    assert "| redis | `--option saq.retries=3` | at-least-once |" in text
