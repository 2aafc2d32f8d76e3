"""deploy/docker-compose.yml's backend services, rendered from the backend packages' declarations.

Each deployed backend (``BackendInfo.port``) is an API service and, with worker processes, a worker
service on the file's ``x-`` templates; a backend that prepares its broker gets a ``prepare-`` service
before them, and one on PostgreSQL takes the ``pg`` templates. The file keeps the rest (the brokers,
the dashboards, the monitoring) by hand, between the two markers below.

    python -m taskbench.k8s.compose            rewrite the generated part of deploy/docker-compose.yml
    python -m taskbench.k8s.compose --check    exit 1 if it is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

from taskbench import backends, brokers
from taskbench.files import write_atomic

BEGIN = "  # -- the backends: generated from their packages (python -m taskbench.k8s.compose); do not edit --"
END = "  # -- end of the generated backends --"
COMPOSE = Path(__file__).resolve().parents[3] / "deploy" / "docker-compose.yml"


def _services(meta: backends.BackendInfo) -> list[str]:
    name, image = meta.name, f"taskbench-{meta.extra}"
    needs_schema = meta.prepares_broker
    pg = not brokers.info(meta.brokers[0]).can_be_ledger  # its tasks on a broker of its own, the ledger on Redis
    env, worker_env = ("*pg-env", "*pg-worker-env") if pg else ("*env", "*worker-env")
    build = f"build: {{<<: *build, args: {{BACKEND: {meta.extra}}}}}"
    ids = f"TASKBENCH_BACKEND: {name}, TASKBENCH_RUN_ID: compose-{name}"
    lines = [f"  # {meta.summary}"]
    if needs_schema:
        lines += [f"  prepare-{name}:", f"    {build}", f"    image: {image}", "    command: [taskbench, prepare]",
                  f"    environment: {{<<: {env}, {ids}}}", "    depends_on: *needs-postgres", "    deploy: *limits"]
    lines += [f"  api-{name}:", "    <<: *api", f"    {build}", f"    image: {image}",
              f"    environment: {{<<: {env}, {ids}}}"]
    if needs_schema:
        lines.append(f"    depends_on: {{<<: [*needs-redis, *needs-postgres], prepare-{name}: "
                     "{condition: service_completed_successfully}}")
    lines.append(f"    ports: ['127.0.0.1:{meta.port}:8000']")
    if meta.has_worker:
        lines += [f"  worker-{name}:", "    <<: *worker", f"    {build}", f"    image: {image}",
                  f"    environment: {{<<: {worker_env}, {ids}}}",
                  f"    depends_on: {{<<: *needs-redis, api-{name}: {{condition: service_started}}}}"]
    return lines


def render() -> str:
    """The generated part, markers included."""
    lines = [BEGIN]
    for meta in backends.REGISTRY.values():
        if meta.port and meta.implemented:
            lines += ["", *_services(meta)]
    return "\n".join([*lines, "", END])


def rewritten(text: str) -> str:
    """``text`` (the compose file) with its generated part rendered anew."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"deploy/docker-compose.yml has lost its markers: {BEGIN!r} ... {END!r}")
    return text[:start] + render() + text[end + len(END):]


def main(argv: list[str]) -> int:
    text = COMPOSE.read_text()
    new = rewritten(text)
    if "--check" in argv:
        if new != text:
            print(f"{COMPOSE} is out of date: run python -m taskbench.k8s.compose", file=sys.stderr)
            return 1
        return 0
    if new != text:
        write_atomic(COMPOSE, new)  # atomically: never a half-written compose file
    print(f"wrote {COMPOSE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
