"""Write prometheus.yml from docker-compose.yml: a scrape job for every API and every worker service.

A backend is added in the compose file only; this script derives its Prometheus jobs from there:

    python deploy/render_prometheus.py          # rewrite deploy/prometheus.yml
    python deploy/render_prometheus.py --check  # exit 1 when deploy/prometheus.yml is out of date

tests/deploy/test_deploy.py runs the check. Needs PyYAML (a dev dependency of taskbench).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parent
COMPOSE = DEPLOY / "docker-compose.yml"
PROMETHEUS = DEPLOY / "prometheus.yml"

HEADER = """\
# Generated from docker-compose.yml by render_prometheus.py: edit the compose file, then run
#   python deploy/render_prometheus.py
# Prometheus for the compose stack: every API, and every replica of every worker service
# (Docker's DNS answers a service name with all its replicas' addresses).
"""


def _api_port(service: dict[str, Any]) -> str:
    command = service["command"]
    return str(command[command.index("--port") + 1])


def jobs(compose: dict[str, Any]) -> list[dict[str, Any]]:
    """One job per ``api-*`` service (its port) and per ``worker-*`` service (every replica, by DNS)."""
    out: list[dict[str, Any]] = []
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        if name.startswith("api-"):
            out.append({
                "job_name": name,
                "honor_labels": True,
                "static_configs": [{
                    "targets": [f"{name}:{_api_port(service)}"],
                    "labels": {"backend": env["TASKBENCH_BACKEND"], "component": "api"},
                }],
            })
        elif name.startswith("worker-"):
            out.append({
                "job_name": name,
                "honor_labels": True,
                "dns_sd_configs": [{
                    "names": [name],
                    "type": "A",
                    "port": int(env["TASKBENCH_METRICS_PORT"]),
                    "refresh_interval": "15s",
                }],
                "relabel_configs": [
                    {"target_label": "backend", "replacement": env["TASKBENCH_BACKEND"]},
                    {"target_label": "component", "replacement": "worker"},
                ],
            })
    return out


def render(compose_text: str) -> str:
    config = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        "scrape_configs": jobs(yaml.safe_load(compose_text)),
    }
    return HEADER + yaml.safe_dump(config, sort_keys=False)


def main(argv: list[str]) -> int:
    text = render(COMPOSE.read_text())
    if "--check" in argv:
        if PROMETHEUS.read_text() != text:
            print(f"{PROMETHEUS} is out of date: run python deploy/render_prometheus.py", file=sys.stderr)
            return 1
        return 0
    PROMETHEUS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
