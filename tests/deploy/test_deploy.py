"""The compose stack, checked without a docker engine: structure, commands, ports, limits, configs."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from taskbench import backends
from taskbench.cli import app

DEPLOY = Path(__file__).parents[2] / "deploy"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    return data


@pytest.fixture(scope="module")
def prometheus() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    return data


def _renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_prometheus", DEPLOY / "render_prometheus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands() -> set[str]:
    return {(c.name or (c.callback.__name__ if c.callback else "")).replace("_", "-")
            for c in app.registered_commands}


def test_every_service_has_cpu_and_memory_limits(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        limits = service.get("deploy", {}).get("resources", {}).get("limits", {})
        assert float(limits["cpus"]) > 0, name
        assert re.fullmatch(r"\d+[MG]", limits["memory"]), name


def test_every_taskbench_command_exists_in_the_cli(compose: dict[str, Any]) -> None:
    commands = _commands()
    used = [s["command"] for s in compose["services"].values() if s.get("command", [""])[0] == "taskbench"]
    assert used
    for argv in used:
        assert argv[1] in commands, argv
        if "--backend" in argv:
            backends.info(argv[argv.index("--backend") + 1])


def test_every_backend_has_an_api_and_workers(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in backends.available():
        api = services[f"api-{name}"]
        assert api["build"]["args"]["BACKEND"] == backends.info(name).extra
        assert api["environment"]["TASKBENCH_BACKEND"] == name
        if backends.info(name).has_worker:
            worker = services[f"worker-{name}"]
            assert worker["build"]["args"]["BACKEND"] == backends.info(name).extra
            assert worker["environment"]["TASKBENCH_BACKEND"] == name
            assert worker["environment"]["TASKBENCH_RUN_ID"] == api["environment"]["TASKBENCH_RUN_ID"]
            assert worker["deploy"]["replicas"] >= 2
            assert worker["environment"]["TASKBENCH_METRICS_PORT"] == "9100"
            assert f"api-{name}" in worker["depends_on"]
        else:
            assert f"worker-{name}" not in services, "a backend without workers has no worker service"
    # and nothing else: a service per backend names a registered one
    per_backend = {n.split("-", 1)[1] for n in services if n.startswith(("api-", "worker-"))}
    assert per_backend == set(backends.available())


def test_every_backend_has_its_prometheus_jobs(prometheus: dict[str, Any]) -> None:
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    for name in backends.available():
        components = ["api", "worker"] if backends.info(name).has_worker else ["api"]
        for component in components:
            job = jobs[f"{component}-{name}"]
            labels = ([s["labels"] for s in job.get("static_configs", [])]
                      or [{r["target_label"]: r["replacement"] for r in job["relabel_configs"]}])
            assert labels == [{"backend": name, "component": component}], job


def test_prometheus_yml_is_rendered_from_the_compose_file() -> None:
    """prometheus.yml is generated: a backend is added in the compose file only."""
    expected = _renderer().render((DEPLOY / "docker-compose.yml").read_text())
    assert (DEPLOY / "prometheus.yml").read_text() == expected, (
        "deploy/prometheus.yml is out of date: run python deploy/render_prometheus.py"
    )


def test_compose_services_come_from_the_templates() -> None:
    """Every API and worker service merges its template (``<<: *api`` / ``<<: *worker``)."""
    text = (DEPLOY / "docker-compose.yml").read_text()
    blocks = re.findall(r"^  ((?:api|worker)-[\w-]+):\n((?:    .*\n)+)", text, flags=re.MULTILINE)
    assert blocks
    for name, body in blocks:
        template = name.split("-", 1)[0]
        assert f"<<: *{template}\n" in body, f"{name} does not merge the x-{template} template"


def test_published_ports_are_loopback_and_distinct(compose: dict[str, Any]) -> None:
    published = [p for s in compose["services"].values() for p in s.get("ports", [])]
    hosts = [p.split(":")[0] for p in published]
    host_ports = [p.split(":")[1] for p in published]
    assert set(hosts) == {"127.0.0.1"}, published
    assert len(host_ports) == len(set(host_ports)), published


def test_dashboards_and_grafana_need_credentials(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in ("flower", "saq-web"):
        assert services[name]["environment"]["TASKBENCH_DASHBOARD_AUTH"].startswith("${DASHBOARD_AUTH:?")
    grafana = services["grafana"]["environment"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


def test_mounted_files_exist(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), volume
        if "build" in service:
            assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()


def test_prometheus_scrapes_every_api_and_worker_service(compose: dict[str, Any],
                                                          prometheus: dict[str, Any]) -> None:
    config = prometheus
    services = compose["services"]
    scraped: set[str] = set()
    for job in config["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, port = target.split(":")
                assert port in services[host]["command"], target  # the port the API listens on
                scraped.add(host)
        for dns in job.get("dns_sd_configs", []):
            for host in dns["names"]:
                assert str(dns["port"]) == services[host]["environment"]["TASKBENCH_METRICS_PORT"]
                scraped.add(host)
    expected = {n for n in services if n.startswith(("api-", "worker-"))}
    assert scraped == expected


def test_prometheus_config_is_valid_for_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (it comes with the prometheus package)")
    out = subprocess.run([promtool, "check", "config", str(DEPLOY / "prometheus.yml")],
                         capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_grafana_provisioning_points_at_the_dashboard() -> None:
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/taskbench.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    assert (DEPLOY / "grafana/dashboards/taskbench.json").is_file()


def test_the_compose_file_s_backends_are_rendered_from_their_declarations() -> None:
    """Every deployed backend's services come from its package's declaration: the file's generated part is
    what ``python -m taskbench.k8s.compose`` renders today."""
    from taskbench.k8s import compose

    text = compose.COMPOSE.read_text()
    assert compose.rewritten(text) == text, "run python -m taskbench.k8s.compose"
