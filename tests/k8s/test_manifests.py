"""``taskbench deploy k8s``: the manifests, checked offline against the Kubernetes OpenAPI schemas."""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result
from kubernetes_validate import utils as k8s_schemas

from tests.helpers import assert_one_line_error

ACCEPTANCE = ["deploy", "k8s", "--backend", "arq", "--workers", "4", "--drivers", "3", "--rate", "3000",
              "--duration", "60"]


def _render(cli: Callable[..., Result], tmp_path: Path, *args: str) -> tuple[Path, list[dict[str, Any]]]:
    path = tmp_path / "run.yaml"
    done = cli(*args, "--out-file", str(path))
    assert done.exit_code == 0, done.output
    return path, list(yaml.safe_load_all(path.read_text()))


def _pods(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]


def _by(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_the_manifests_pass_the_kubernetes_schemas(cli: Callable[..., Result], tmp_path: Path) -> None:
    path, docs = _render(cli, tmp_path, *ACCEPTANCE)
    version = k8s_schemas.latest_version()
    for doc in docs:  # strict: an unknown field (a typo) fails as well as a wrong type
        k8s_schemas.validate(doc, version, strict=True)
    kinds = [d["kind"] for d in docs]
    assert kinds.count("StatefulSet") == 2 and kinds.count("Job") == 2 and kinds.count("Deployment") == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the Secret

    broken = _by(docs, "Job", "taskbench-driver")
    broken["spec"]["completionsMode"] = "Indexed"  # the validator does bite on a misspelt field
    with pytest.raises(k8s_schemas.ValidationError):
        k8s_schemas.validate(broken, version, strict=True)


def test_every_component_reads_the_same_run_id_urls_and_secrets(cli: Callable[..., Result], tmp_path: Path) -> None:
    _, docs = _render(cli, tmp_path, *ACCEPTANCE)
    config = _by(docs, "ConfigMap", "taskbench-config")["data"]
    secret = _by(docs, "Secret", "taskbench-secrets")["stringData"]
    run_id = config["TASKBENCH_RUN_ID"]
    assert all(d["metadata"]["labels"]["app.kubernetes.io/instance"] == run_id for d in docs)
    for name, pod in _pods(docs):
        for container in pod["containers"]:
            if container["name"] != "redis":
                assert container["envFrom"] == [{"configMapRef": {"name": "taskbench-config"}},
                                                {"secretRef": {"name": "taskbench-secrets"}}], name
    # the URLs name the in-cluster services, with the passwords their servers' configs require
    for url_key, conf_key, service in (("TASKBENCH_REDIS_URL", "ledger.conf", "taskbench-ledger"),
                                       ("TASKBENCH_BROKER_URL", "broker.conf", "taskbench-broker")):
        match = re.fullmatch(r"redis://:([^@]+)@([^:]+):6379/0", secret[url_key])
        assert match is not None
        assert f"requirepass {match.group(1)}\n" in secret[conf_key]
        assert match.group(2) == service and _by(docs, "Service", service)
    assert "appendonly yes" in secret["broker.conf"] and "appendfsync always" in secret["broker.conf"]

    drivers = _by(docs, "Job", "taskbench-driver")["spec"]
    assert (drivers["completionMode"], drivers["completions"], drivers["parallelism"]) == ("Indexed", 3, 3)
    args = drivers["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--segment") + 1] == "$(SEGMENT_INDEX)/3"
    assert args[args.index("--model") + 1] == "open" and args[args.index("--rate") + 1] == "3000"
    url = args[args.index("--url") + 1]
    assert url.startswith("http://taskbench-api:8000/") and _by(docs, "Service", "taskbench-api")
    workers = _by(docs, "Deployment", "taskbench-worker")["spec"]["replicas"]
    collector = _by(docs, "Job", "taskbench-collector")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert collector[collector.index("--drivers") + 1] == "3" and workers == 4
    assert collector[collector.index("--workers") + 1] == args[args.index("--wait-workers") + 1] == "4"


def test_no_password_outside_the_secret_and_no_privileged_pod(cli: Callable[..., Result], tmp_path: Path) -> None:
    _, docs = _render(cli, tmp_path, *ACCEPTANCE, "--api-cpus", "0.5", "--worker-cpus", "1",
                      "--worker-memory-mb", "300")
    secret = _by(docs, "Secret", "taskbench-secrets")["stringData"]
    passwords = {m for conf in ("ledger.conf", "broker.conf") for m in re.findall(r"requirepass (\S+)", secret[conf])}
    assert len(passwords) == 2
    for doc in docs:
        if doc["kind"] != "Secret":
            assert not any(p in yaml.safe_dump(doc) for p in passwords), doc["metadata"]["name"]
    for name, pod in _pods(docs):
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert "privileged" not in container["securityContext"]
    api = _by(docs, "Deployment", "taskbench-api")["spec"]["template"]
    assert api["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "500m"}
    assert api["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    worker = _by(docs, "Deployment", "taskbench-worker")["spec"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["requests"] == worker["resources"]["limits"] == {"cpu": "1000m", "memory": "300Mi"}


def test_kubectl_delete_removes_everything(cli: Callable[..., Result], tmp_path: Path) -> None:
    _, docs = _render(cli, tmp_path, *ACCEPTANCE, "--namespace", "bench-1")
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": docs[0]["metadata"]}
    assert all(d["metadata"]["namespace"] == "bench-1" for d in docs[1:])
    assert not any("volumeClaimTemplates" in d.get("spec", {}) for d in docs)  # no PVC outlives the run
    assert {d["kind"] for d in docs} <= {"Namespace", "ConfigMap", "Secret", "Service", "StatefulSet", "Deployment",
                                         "Job"}


def test_your_own_redis_servers_replace_the_in_cluster_ones(cli: Callable[..., Result], tmp_path: Path) -> None:
    _, docs = _render(cli, tmp_path, *ACCEPTANCE, "--broker-url", "redis://:b-secret@redis.example:6379/1",
                      "--redis-url", "redis://:l-secret@redis.example:6379/2")
    assert not [d for d in docs if d["kind"] == "StatefulSet"]
    secret = _by(docs, "Secret", "taskbench-secrets")["stringData"]
    assert secret["TASKBENCH_BROKER_URL"].endswith("@redis.example:6379/1") and "ledger.conf" not in secret
    for doc in docs:
        k8s_schemas.validate(doc, k8s_schemas.latest_version(), strict=True)


def test_bad_options_are_one_line(cli: Callable[..., Result], tmp_path: Path) -> None:
    out = str(tmp_path / "x.yaml")
    assert_one_line_error(cli(*ACCEPTANCE, "--namespace", "default", "--out-file", out), "a namespace of its own")
    assert_one_line_error(cli(*ACCEPTANCE, "--namespace", "Bad_Name", "--out-file", out), "a Kubernetes name")
    assert_one_line_error(cli("deploy", "k8s", "--backend", "nope", "--out-file", out), "nope")
    assert_one_line_error(cli("deploy", "k8s", "--broker", "rabbitmq", "--backend", "celery", "--out-file", out),
                          "give --broker-url")
    assert_one_line_error(cli("deploy", "k8s", "--drivers", "5", "--users", "2", "--out-file", out), "cannot be split")
