"""The Kubernetes objects of one cluster run, as plain dicts (``taskbench deploy k8s`` writes them as YAML).

What a platform engineer can rely on:

- every object is named ``taskbench-<component>`` and labelled ``app.kubernetes.io/name: taskbench``,
  ``app.kubernetes.io/component``, ``app.kubernetes.io/instance: <run id>`` and ``taskbench.dev/backend``;
- every object lives in the run's Namespace, so ``kubectl delete -f`` of the file removes all of it (the Redis
  servers keep their AOF in an ``emptyDir``: it survives a container's restart, not the pod's deletion, and
  leaves no PersistentVolumeClaim behind);
- passwords are in one Secret only (the Redis servers read theirs from a config file mounted from it; the
  other pods get the URLs through ``envFrom``): never in a ConfigMap or a command line;
- no privileged pod: non-root, no privilege escalation, every capability dropped, the default seccomp
  profile, no service-account token;
- every component reads the same run id, URLs and secrets: one ConfigMap and one Secret, ``envFrom``.
"""

from __future__ import annotations

from typing import Any

from taskbench.k8s.config import API_PORT, APP, METRICS_PORT, REDIS_PORT, Cluster, Resources

Obj = dict[str, Any]

SECRET = f"{APP}-secrets"
CONFIG = f"{APP}-config"
#: what a pod's servers bind: the pod's own network namespace, reached only through its Service (the API, a
#: worker's /metrics for Prometheus, Redis); never the node's
POD_ADDRESS = "0.0.0.0"  # noqa: S104 - inside a pod, on purpose (docs/scale-out.md)
#: the one writable folder of a taskbench container (its root filesystem is read-only): an emptyDir
TMP = "/tmp"  # noqa: S108 - a volume of the pod's own
#: the image's user (deploy/Dockerfile: useradd --uid 10001); the Redis image's is 999
IMAGE_UID = 10001
REDIS_UID = 999


def labels(cluster: Cluster, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/component": component,
            "app.kubernetes.io/instance": cluster.run_id, "taskbench.dev/backend": cluster.backend}


def _selector(cluster: Cluster, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/component": component,
            "app.kubernetes.io/instance": cluster.run_id}


def _meta(cluster: Cluster, name: str, component: str, **extra: Any) -> Obj:
    return {"name": name, "namespace": cluster.namespace, "labels": labels(cluster, component), **extra}


def _container_security() -> Obj:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def _pod_security(uid: int) -> Obj:
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"}}


def _taskbench(cluster: Cluster, name: str, args: list[str], resources: Resources, **extra: Any) -> Obj:
    """A container of the taskbench image: the run's ConfigMap and Secret as its environment."""
    container: Obj = {
        "name": name, "image": cluster.image, "command": ["taskbench"], "args": args,
        "envFrom": [{"configMapRef": {"name": CONFIG}}, {"secretRef": {"name": SECRET}}],
        "securityContext": _container_security(),
        "volumeMounts": [{"name": "tmp", "mountPath": TMP}],
        **extra,
    }
    if resources.to_k8s():
        container["resources"] = resources.to_k8s()
    return container


def _pod(cluster: Cluster, component: str, containers: list[Obj], *, uid: int = IMAGE_UID,
         annotations: dict[str, str] | None = None, volumes: list[Obj] | None = None, **spec: Any) -> Obj:
    meta: Obj = {"labels": labels(cluster, component)}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {
        "automountServiceAccountToken": False, "securityContext": _pod_security(uid), "containers": containers,
        "volumes": [{"name": "tmp", "emptyDir": {}}, *(volumes or [])], **spec}}


def _scrape(port: int) -> dict[str, str]:
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}


def _service(cluster: Cluster, component: str, port: int, *, headless: bool = False) -> Obj:
    spec: Obj = {"selector": _selector(cluster, component), "ports": [{"name": "main", "port": port,
                                                                         "targetPort": port}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(cluster, f"{APP}-{component}", component),
            "spec": spec}


def redis_config(password: str, *, aof: str | None) -> str:
    """A Redis server's config file (in the Secret: it holds the password)."""
    persistence = ["appendonly yes", f"appendfsync {aof}"] if aof else ["appendonly no"]
    return "\n".join([f"port {REDIS_PORT}", f"bind {POD_ADDRESS}", "protected-mode no", 'save ""', 'dir "/data"',
                      *persistence, f"requirepass {password}"]) + "\n"


def _redis(cluster: Cluster, component: str, key: str) -> list[Obj]:
    """A one-replica StatefulSet running redis-server with the config of ``key`` in the Secret, and its
    headless Service (the StatefulSet's governing service, and the address the others use)."""
    container = {
        "name": "redis", "image": cluster.redis_image, "command": ["redis-server", "/etc/redis/redis.conf"],
        "ports": [{"name": "redis", "containerPort": REDIS_PORT}],
        "securityContext": _container_security(),
        "volumeMounts": [{"name": "config", "mountPath": "/etc/redis", "readOnly": True},
                         {"name": "data", "mountPath": "/data"}],
        "readinessProbe": {"tcpSocket": {"port": REDIS_PORT}, "periodSeconds": 2},
    }
    volumes = [{"name": "config", "secret": {"secretName": SECRET, "items": [{"key": key, "path": "redis.conf"}]}},
               {"name": "data", "emptyDir": {}}]
    stateful = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(cluster, f"{APP}-{component}", component),
        "spec": {"serviceName": f"{APP}-{component}", "replicas": 1,
                 "selector": {"matchLabels": _selector(cluster, component)},
                 "template": _pod(cluster, component, [container], uid=REDIS_UID, volumes=volumes)},
    }
    return [_service(cluster, component, REDIS_PORT, headless=True), stateful]


def environment(cluster: Cluster) -> tuple[dict[str, str], dict[str, str]]:
    """The run's environment: the ConfigMap's (no secret in it) and the Secret's (the URLs, the Redis configs)."""
    config = {"TASKBENCH_BACKEND": cluster.backend, "TASKBENCH_RUN_ID": cluster.run_id,
              "TASKBENCH_BROKER": cluster.broker, "TASKBENCH_ENQUEUE_MODE": cluster.enqueue_mode,
              "TASKBENCH_CONCURRENCY": str(cluster.concurrency), "TASKBENCH_METRICS_HOST": POD_ADDRESS,
              "TASKBENCH_METRICS_PORT": str(METRICS_PORT), "PYTHONUNBUFFERED": "1"}
    secret = {"TASKBENCH_REDIS_URL": cluster.ledger_url(), "TASKBENCH_BROKER_URL": cluster.broker_address()}
    if cluster.redis_url is None:
        secret["ledger.conf"] = redis_config(cluster.ledger_password, aof=None)
    if cluster.broker_url is None:
        secret["broker.conf"] = redis_config(cluster.broker_password,
                                             aof=None if cluster.redis_fsync == "none" else cluster.redis_fsync)
    return config, secret


def manifests(cluster: Cluster) -> list[Obj]:
    """Every object of the run, in the order ``kubectl apply -f`` creates them."""
    config, secret = environment(cluster)
    objs: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace,
                                                                "labels": labels(cluster, "namespace")}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(cluster, CONFIG, "config"), "data": config},
        {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(cluster, SECRET, "secrets"), "type": "Opaque",
         "stringData": secret},
    ]
    if cluster.redis_url is None:
        objs += _redis(cluster, "ledger", "ledger.conf")
    if cluster.broker_url is None:
        objs += _redis(cluster, "broker", "broker.conf")
    probe = {"httpGet": {"path": "/health", "port": API_PORT}, "periodSeconds": 2}
    api = _taskbench(cluster, "api", ["serve", "--host", POD_ADDRESS, "--port", str(API_PORT)], cluster.api,
                     ports=[{"name": "http", "containerPort": API_PORT}], readinessProbe=probe)
    objs += [
        _service(cluster, "api", API_PORT),
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(cluster, f"{APP}-api", "api"),
         "spec": {"replicas": cluster.api_replicas, "selector": {"matchLabels": _selector(cluster, "api")},
                  "template": _pod(cluster, "api", [api], annotations=_scrape(API_PORT))}},
    ]
    workers = cluster.workers if cluster.has_worker else 0
    if workers:
        worker = _taskbench(cluster, "worker", ["worker"], cluster.worker,
                            ports=[{"name": "metrics", "containerPort": METRICS_PORT}])
        objs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": _meta(cluster, f"{APP}-worker", "worker"),
                     "spec": {"replicas": workers, "selector": {"matchLabels": _selector(cluster, "worker")},
                              "template": _pod(cluster, "worker", [worker], annotations=_scrape(METRICS_PORT))}})
    objs += [_drivers(cluster, workers), _collector(cluster, workers)]
    return objs


def load_args(cluster: Cluster) -> list[str]:
    """The whole load's options, as every driver gets them (each takes its share by its index)."""
    spec = cluster.load
    out = ["--model", spec.model, "--users", str(spec.users), "--driver-processes", str(spec.processes),
           "--timeout", f"{spec.timeout:g}"]
    if spec.model == "ramp":
        out += ["--ramp", f"{spec.ramp_per_s:g}"]
    if spec.rate is not None:
        out += ["--rate", f"{spec.rate:g}"]
    if spec.requests is not None:
        out += ["--requests", str(spec.requests)]
    if spec.duration is not None:
        out += ["--duration", f"{spec.duration:g}"]
    return out


def _drivers(cluster: Cluster, workers: int) -> Obj:
    """An Indexed Job: pod i drives segment i of N (its completion index), all starting together (the
    barrier in the ledger's Redis), once the API answers and every worker registered."""
    index = {"name": "SEGMENT_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    node = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    args = ["drive", "--segment", f"$(SEGMENT_INDEX)/{cluster.drivers}", "--url", cluster.api_url(),
            "--allow-remote", "--node", "$(NODE_NAME)", "--wait-workers", str(workers), *load_args(cluster)]
    container = _taskbench(cluster, "driver", args, cluster.driver, env=[index, node])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(cluster, f"{APP}-driver", "driver"),
            "spec": {"completionMode": "Indexed", "completions": cluster.drivers, "parallelism": cluster.drivers,
                     "backoffLimit": 0,
                     "template": _pod(cluster, "driver", [container], restartPolicy="Never")}}


def _collector(cluster: Cluster, workers: int) -> Obj:
    """A Job that waits for every driver's segment, merges them, drains and audits the ledger, and logs the
    result (``kubectl logs job/taskbench-collector | taskbench collect -``)."""
    args = ["collector", "--drivers", str(cluster.drivers), "--workers", str(workers), "--workload",
            cluster.workload, "--drain-timeout", f"{cluster.drain_timeout:g}"]
    container = _taskbench(cluster, "collector", args, Resources())
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(cluster, f"{APP}-collector", "collector"),
            "spec": {"backoffLimit": 0, "template": _pod(cluster, "collector", [container], restartPolicy="Never")}}
