"""What ``taskbench deploy k8s`` renders: one run's parameters (:class:`Cluster`), checked once."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

from taskbench import backends, brokers
from taskbench.driver import LoadSpec
from taskbench.settings import check_run_id

#: a Kubernetes name (RFC 1123 label): what a namespace and every object's name must be
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: a label's value (a run id is ``app.kubernetes.io/instance``): at most 63 characters, checked apart
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")

#: the name every object starts with and the value of ``app.kubernetes.io/name``
APP = "taskbench"
API_PORT = 8000
METRICS_PORT = 9100  # a worker's /metrics inside its pod (TASKBENCH_METRICS_HOST=0.0.0.0: scraped by Prometheus)
REDIS_PORT = 6379


@dataclass(frozen=True, kw_only=True)
class Resources:
    """A component's CPU (cores) and memory (MB): requested and limited alike, as ``--api-cpus`` and a
    scenario's limits cap a process here (None: no request, no limit)."""

    cpus: float | None = None
    memory_mb: int | None = None

    def to_k8s(self) -> dict[str, dict[str, str]]:
        values: dict[str, str] = {}
        if self.cpus is not None:
            values["cpu"] = f"{round(self.cpus * 1000)}m"
        if self.memory_mb is not None:
            values["memory"] = f"{self.memory_mb}Mi"
        return {"requests": dict(values), "limits": dict(values)} if values else {}


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """One run on a cluster: the stack (API, workers, Redis or the user's), the drivers and the collector."""

    backend: str
    load: LoadSpec
    image: str
    namespace: str = "taskbench"
    workload: str = "io/simple"
    enqueue_mode: str = "awaited"
    api_replicas: int = 1
    workers: int = 1
    concurrency: int = 10
    drivers: int = 1
    broker: str = "redis"  # a name of taskbench.brokers; in the cluster only Redis, else give broker_url
    broker_url: str | None = None  # the user's broker: no in-cluster broker then
    redis_url: str | None = None  # the user's ledger Redis: no in-cluster ledger then
    redis_fsync: str = "always"  # the in-cluster broker's AOF appendfsync
    redis_image: str = "redis:7.4-alpine"
    api: Resources = field(default_factory=Resources)
    worker: Resources = field(default_factory=Resources)
    driver: Resources = field(default_factory=Resources)
    drain_timeout: float = 120.0
    run_id: str = field(default_factory=lambda: f"k8s-{secrets.token_hex(4)}")
    #: the passwords of the in-cluster Redis servers, made once per rendering (they go into the Secret only)
    ledger_password: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    broker_password: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)

    def __post_init__(self) -> None:
        info = backends.info(self.backend)  # a ValueError naming the backends for an unknown one
        if self.broker not in info.brokers:
            raise ValueError(f"{self.backend} runs on {', '.join(info.brokers)}, not {self.broker}")
        if not brokers.info(self.broker).can_be_ledger and self.broker_url is None:
            raise ValueError(f"--broker {self.broker}: give --broker-url (the in-cluster broker is Redis)")
        check_run_id(self.run_id, "--run-id")  # a folder under --output when collected, a key prefix
        if len(self.run_id) > 63 or not _LABEL_VALUE.match(self.run_id):  # app.kubernetes.io/instance
            raise ValueError(f"--run-id {self.run_id!r}: a Kubernetes label value too (at most 63 characters, "
                             "starting and ending with a letter or a digit)")
        if not _LABEL.match(self.namespace):
            raise ValueError(f"--namespace {self.namespace!r}: a Kubernetes name (lower case letters, digits, '-')")
        if self.namespace == "default" or self.namespace.startswith("kube-"):
            raise ValueError(f"--namespace {self.namespace}: give a namespace of its own; `kubectl delete -f` "
                             "deletes it with everything in it")
        if not self.image or any(c.isspace() for c in self.image):
            raise ValueError(f"--image {self.image!r}: an image reference, e.g. ghcr.io/you/taskbench-arq:1")
        for name, value, low in (("--api-replicas", self.api_replicas, 1), ("--workers", self.workers, 0),
                                 ("--drivers", self.drivers, 1)):
            if not low <= value <= 1000:
                raise ValueError(f"{name} must be in [{low}, 1000], got {value}")
        if self.load.users < self.drivers:
            raise ValueError(f"--users {self.load.users} cannot be split over {self.drivers} drivers (one user each "
                             "at least)")
        for url, flag in ((self.broker_url, "--broker-url"), (self.redis_url, "--redis-url")):
            if url is not None and "://" not in url:
                raise ValueError(f"{flag}: a URL, e.g. redis://:password@host:6379/0")

    @property
    def has_worker(self) -> bool:
        return backends.info(self.backend).has_worker

    def ledger_url(self) -> str:
        return self.redis_url or f"redis://:{self.ledger_password}@{APP}-ledger:{REDIS_PORT}/0"

    def broker_address(self) -> str:
        return self.broker_url or f"redis://:{self.broker_password}@{APP}-broker:{REDIS_PORT}/0"

    def api_url(self) -> str:
        return f"http://{APP}-api:{API_PORT}/api/v1/incr/{self.workload}/{self.backend}"
