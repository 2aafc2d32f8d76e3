"""The parameter schema drives the command line, the scenario files, RunConfig and the processes' environment."""

from __future__ import annotations

import os
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from taskbench import brokers, params
from taskbench.cli import app
from taskbench.harness.config import RunConfig, load_spec
from taskbench.scenarios import ScenarioError, load
from taskbench.scenarios.parse import PARAMETERS, Case
from taskbench.settings import Settings

CLI = CliRunner()


def _options(command: str) -> dict[str, Any]:
    """The click options of a command (typer carries its own click: no isinstance against ``click``)."""
    group: Any = typer.main.get_command(app)
    return {p.name: p for p in group.commands[command].params if p.name}


def test_run_rejects_users_out_of_the_schema_range() -> None:
    low, high = params.get("users").bounds or (0, 0)
    out = CLI.invoke(app, ["run", "--users", str(low - 1)])
    assert out.exit_code == 2
    assert f"Invalid value for '--users' / '-u': Input should be greater than or equal to {low}" in _text(out.output)
    out = CLI.invoke(app, ["run", "--users", str(high + 1)])
    assert out.exit_code == 2
    assert f"less than or equal to {high}" in _text(out.output)


def test_run_takes_a_duration_with_its_unit_within_the_schema_range() -> None:
    out = CLI.invoke(app, ["run", "--timeout", "11m"])
    assert out.exit_code == 2
    assert "Invalid value for '--timeout': must be between 100ms and 10m, got '11m'" in _text(out.output)
    out = CLI.invoke(app, ["run", "--broker-delay", "2s"])  # an option in ms
    assert out.exit_code == 2 and "between 0ms and 1s" in _text(out.output)


def _text(output: str) -> str:
    """The words of a rich error panel, its borders and line breaks gone."""
    return " ".join(output.replace("│", " ").split())


@pytest.mark.parametrize("command", ["run", "up", "worker", "ceiling", "drain"])
def test_the_cli_bounds_and_defaults_are_the_schema(command: str) -> None:
    checked = 0
    for name, option in _options(command).items():
        try:
            param = params.get(name)
        except KeyError:
            continue
        if not (param.cli or param.env):
            continue
        checked += 1
        if param.unit:  # a duration (30s, 2m, 1h): its parser holds the bounds
            parser = option.type_descriptor.parameter_info.parser
            assert (parser.low, parser.high, parser.unit) == (*(param.bounds or ()), param.unit), name
        elif param.bounds:
            assert (option.min, option.max) == param.bounds, name
        if command == "run" and name == "broker":  # unset: each backend on its own default broker
            assert option.default is None
            assert "each backend's own" in (option.help or "")
        elif command == "run" and name == "drain_timeout":  # unset: the schema's, grown with the backlog
            assert option.default is None
            assert f"default: {param.default:g}" in (option.help or "")
            assert param.help in (option.help or ""), name
        elif command == "run":
            assert option.default == param.default, name
            assert param.help in (option.help or ""), name
    assert checked


def test_every_run_parameter_of_the_schema_is_a_run_option() -> None:
    options = _options("run")
    assert {p.name for p in params.SCHEMA if p.cli} <= set(options)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nope"], "--model must be closed, open or ramp, not 'nope'"),
        (["--enqueue-mode", "later"], "--enqueue-mode must be awaited or after-response, not 'later'"),
        (["--broker", "kafka"], "--broker must be redis, rabbitmq, nats or postgres, not 'kafka'"),
        (["--model", "open"], "the open model needs rate"),
    ],
)
def test_run_choices_are_checked_once_with_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    out = CLI.invoke(app, ["run", "--output", str(tmp_path), *args])
    assert out.exit_code == 2
    assert message in out.output


def test_scenario_parameters_come_from_the_schema() -> None:
    for kind in params.KINDS:
        assert PARAMETERS[kind]
        for name, param in PARAMETERS[kind].items():
            assert param is params.get(name, kind)
            assert kind in param.kinds


def test_scenarios_parameters_lists_the_schema() -> None:
    out = CLI.invoke(app, ["scenarios", "--parameters"])
    assert out.exit_code == 0
    assert "users              int 1..10000" in out.output
    assert "model              closed | open | ramp" in out.output
    for kind in params.KINDS:
        for name, param in params.for_kind(kind).items():
            assert f"  {name:18} {param.describe():32} {param.help}" in out.output


def test_a_scenario_out_of_range_names_file_line_and_schema_range(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(textwrap.dedent("""\
        name = "t"
        description = "d"
        kind = "queue"
        [defaults]
        backend = "arq"
        workload = "io/simple"
        requests = 10
        users = 0
    """))
    with pytest.raises(ScenarioError) as caught:
        load(path)
    assert str(caught.value) == f"{path}:8: users must be between 1 and 10000, got 0"


def test_runconfig_checks_the_schema_ranges_in_option_words() -> None:
    with pytest.raises(ValueError, match=r"^--workers must be between 1 and 64, got 0$"):
        RunConfig(workers=0)
    with pytest.raises(ValueError, match=r"^--drain-timeout must be between 1 and 3600, got 0.5$"):
        RunConfig(drain_timeout=0.5)
    with pytest.raises(ValueError, match=r"^--enqueue-mode must be awaited or after-response"):
        RunConfig(enqueue_mode="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^--users must be between 1 and 10000, got 0$"):
        load_spec({"users": 0})


def test_load_spec_defaults_are_the_schema() -> None:
    load = load_spec({})
    assert load.model == params.default("model")
    assert load.users == params.default("users")
    assert load.ramp_per_s == params.default("ramp")
    assert load.timeout == params.default("timeout")
    assert load.processes == params.default("driver_processes")
    assert load.requests == 10_000  # neither bound given: as `run` without --requests/--duration


def test_a_rate_is_the_open_models() -> None:
    # `--rate 300` with the default closed model: arrivals at 300/s, not a closed loop that ignores it
    assert load_spec({"rate": 300, "duration": 5}).model == "open"
    assert load_spec({"model": "closed", "rate": 300, "duration": 5}).model == "open"
    assert load_spec({"model": "ramp", "rate": 300, "duration": 5}).model == "ramp"
    assert load_spec({"duration": 5}).model == "closed"


def test_queue_config_takes_the_schema_defaults(tmp_path: Path) -> None:
    from taskbench.scenarios.run import queue_config

    config = queue_config(Case(0, {"backend": "arq", "workload": "io/simple", "requests": 5}, {}, None),
                          tmp_path, None)
    for name in ("workers", "concurrency", "enqueue_mode", "io_delay", "cpu_iterations", "broker", "warmup",
                 "drain_timeout", "task_timeout"):
        assert getattr(config, name) == params.default(name, "queue"), name
    assert config.load.users == params.default("users") and config.fault is None


def test_settings_env_is_what_settings_reads_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = RunConfig(backends=("celery",), concurrency=7, enqueue_mode="after-response", io_delay=0.25,
                       cpu_iterations=1234, threads=5, processes=2, broker="rabbitmq",
                       broker_url="amqp://u:p@127.0.0.1:1/", stop_timeout=4.5, task_timeout=33.0,
                       http_metrics=False, output=tmp_path)
    env = params.settings_env(config, backend="celery", run_id="r-1", redis_url="redis://127.0.0.1:1/0")
    assert env["PYTHONUNBUFFERED"] == "1"
    for key in [k for k in os.environ if k.startswith("TASKBENCH_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert (settings.backend, settings.run_id, settings.redis_url) == ("celery", "r-1", "redis://127.0.0.1:1/0")
    assert settings.broker_url == "amqp://u:p@127.0.0.1:1/"
    for param in params.SCHEMA:
        if param.env and param.attribute:
            assert getattr(settings, param.env.lower()) == getattr(config, param.attribute), param.name


def test_settings_env_leaves_out_what_a_config_lacks() -> None:
    class Partial:
        concurrency = 3

    env = params.settings_env(Partial(), backend="arq", run_id="x", redis_url="redis://h/0")
    assert env == {"TASKBENCH_BACKEND": "arq", "TASKBENCH_RUN_ID": "x", "TASKBENCH_REDIS_URL": "redis://h/0",
                   "TASKBENCH_CONCURRENCY": "3", "PYTHONUNBUFFERED": "1"}
    assert "TASKBENCH_METRICS" not in params.settings_env(RunConfig(), components=("worker",))
    with pytest.raises(KeyError, match="workers"):
        params.settings_env(Partial(), workers=2)


def test_settings_fields_match_the_schema() -> None:
    for param in params.SCHEMA:
        if not param.env:
            continue
        info = Settings.model_fields[param.env.lower()]
        if param.bounds:
            ge = next(m.ge for m in info.metadata if hasattr(m, "ge"))
            le = next(m.le for m in info.metadata if hasattr(m, "le"))
            assert (ge, le) == param.bounds, param.name
        if param.name == "broker":  # a str checked against the broker registry, as the schema's choices are
            assert param.choices == brokers.NAMES
            with pytest.raises(ValueError, match="unknown broker 'kafka'"):
                Settings(broker="kafka")
        elif param.choices:
            assert typing.get_args(info.annotation) == param.choices, param.name
        if param.default is not None:
            assert info.default == param.default, param.name


def test_every_float_setting_refuses_nan_and_the_infinities_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    floats = [name for name, info in Settings.model_fields.items() if info.annotation in (float, float | None)]
    assert "io_delay" in floats and "task_timeout" in floats
    for name in floats:
        for text in ("nan", "inf", "-inf", "1e999"):
            monkeypatch.setenv(f"TASKBENCH_{name.upper()}", text)
            with pytest.raises(ValueError, match=name):
                Settings()
        monkeypatch.delenv(f"TASKBENCH_{name.upper()}")
