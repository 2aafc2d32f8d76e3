"""``taskbench deploy k8s``: the manifests of one run on a Kubernetes cluster, as plain YAML (docs/scale-out.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taskbench import params
from taskbench.cli._common import App, fail
from taskbench.files import write_atomic

app = App(no_args_is_help=True, help="Render what runs the benchmark elsewhere: `deploy k8s`.")

Cpus = Annotated[float | None, typer.Option(min=0.01, max=1024, help="cores, requested and limited")]
Memory = Annotated[int | None, typer.Option(min=16, max=1_048_576, help="MB, requested and limited")]


@app.command("k8s")
def k8s(
    backend: Annotated[str, typer.Option(help="the backend (a name of `taskbench backends`)")] = "arq",
    image: Annotated[str | None, typer.Option(
        help="the backend's image, built from deploy/Dockerfile with --build-arg BACKEND=<backend> "
             "(default: taskbench-<backend>:latest)")] = None,
    namespace: Annotated[str, typer.Option(help="the run's own namespace (created; `kubectl delete -f` removes it)")
                         ] = "taskbench",
    workload: Annotated[str, params.option("workload")] = params.default("workload"),
    api_replicas: Annotated[int, typer.Option(min=1, max=1000, help="API pods behind the Service")] = 1,
    workers: Annotated[int, params.option("workers")] = params.default("workers"),
    concurrency: Annotated[int, params.option("concurrency")] = params.default("concurrency"),
    drivers: Annotated[int, typer.Option(min=1, max=1000, help="driver pods (an Indexed Job), the load split "
                                                               "between them")] = 1,
    model: Annotated[str, params.option("model")] = params.default("model"),
    users: Annotated[int, params.option("users")] = params.default("users"),
    rate: Annotated[float | None, params.option("rate")] = params.default("rate"),
    ramp: Annotated[float, params.option("ramp")] = params.default("ramp"),
    requests: Annotated[int | None, params.option("requests")] = params.default("requests"),
    duration: Annotated[float | None, params.option("duration")] = params.default("duration"),
    driver_processes: Annotated[int, params.option("driver_processes")] = params.default("driver_processes"),
    timeout: Annotated[float, params.option("timeout")] = params.default("timeout"),
    enqueue_mode: Annotated[str, params.option("enqueue_mode")] = params.default("enqueue_mode"),
    broker: Annotated[str, typer.Option(help="redis (in the cluster, or --broker-url), or rabbitmq | nats | "
                                             "postgres with --broker-url")] = "redis",
    broker_url: Annotated[str | None, typer.Option(
        help="your broker instead of the in-cluster Redis (it goes into the Secret only)")] = None,
    redis_url: Annotated[str | None, typer.Option(
        help="your ledger Redis instead of the in-cluster one (it goes into the Secret only)")] = None,
    redis_fsync: Annotated[str, params.option("redis_fsync")] = params.default("redis_fsync"),
    redis_image: Annotated[str, typer.Option(help="the in-cluster Redis servers' image")] = "redis:7.4-alpine",
    api_cpus: Cpus = None,
    api_memory_mb: Memory = None,
    worker_cpus: Cpus = None,
    worker_memory_mb: Memory = None,
    driver_cpus: Cpus = None,
    drain_timeout: Annotated[float, params.option("drain_timeout")] = params.default("drain_timeout"),
    run_id: Annotated[str | None, typer.Option(help="the run's id (default: k8s-<random>)")] = None,
    out_file: Annotated[Path | None, typer.Option(
        "--out-file", help="the YAML file (default: taskbench-<run id>.yaml here; mode 0600: it holds the "
                           "Secret)")] = None,
) -> None:
    """Write the manifests of one run: Secret, ConfigMap, Redis StatefulSets (or your URLs), the API and the
    workers, the drivers as an Indexed Job, the collector Job."""
    from taskbench.harness.case.pipeline import describe_load
    from taskbench.harness.config import load_spec
    from taskbench.k8s.config import Cluster, Resources
    from taskbench.k8s.manifests import manifests
    from taskbench.k8s.yaml_text import dump_all

    try:
        load = load_spec({"model": model, "users": users, "rate": rate, "ramp": ramp, "requests": requests,
                          "duration": duration, "driver_processes": driver_processes, "timeout": timeout})
        extra = {"run_id": run_id} if run_id is not None else {}
        cluster = Cluster(backend=backend, load=load, image=image or f"taskbench-{backend}:latest",
                          namespace=namespace, workload=workload,
                          enqueue_mode=enqueue_mode, api_replicas=api_replicas, workers=workers,
                          concurrency=concurrency, drivers=drivers, broker=broker, broker_url=broker_url,
                          redis_url=redis_url, redis_fsync=redis_fsync, redis_image=redis_image,
                          api=Resources(cpus=api_cpus, memory_mb=api_memory_mb),
                          worker=Resources(cpus=worker_cpus, memory_mb=worker_memory_mb),
                          driver=Resources(cpus=driver_cpus), drain_timeout=drain_timeout, **extra)
    except ValueError as exc:
        fail(str(exc))
    text = dump_all(manifests(cluster))
    path = out_file or Path(f"taskbench-{cluster.run_id}.yaml")
    try:
        write_atomic(path, text, mode=0o600)
    except OSError as exc:
        fail(f"{path}: cannot write it ({exc.strerror or exc})")
    workers_line = f", {cluster.workers} worker(s)" if cluster.has_worker else ""
    typer.echo(f"wrote {path} (run {cluster.run_id}, namespace {cluster.namespace}): {cluster.backend}, "
               f"{cluster.api_replicas} API pod(s){workers_line}, {cluster.drivers} driver pod(s); load: "
               f"{describe_load(cluster.load)}")
    typer.echo(f"  kubectl apply -f {path}")
    typer.echo(f"  kubectl -n {cluster.namespace} wait --for=condition=complete --timeout=1h job/taskbench-collector")
    typer.echo(f"  kubectl -n {cluster.namespace} logs job/taskbench-collector | taskbench collect -")
    typer.echo(f"  kubectl delete -f {path}")
