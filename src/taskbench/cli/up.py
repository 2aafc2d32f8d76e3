"""``taskbench up``: the live stack, with its URLs and live counts, until Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskbench import params
from taskbench.cli._common import backend_names, fail, interrupt_on_signals, say_on

if TYPE_CHECKING:
    from taskbench.harness.commands.up import Stack


def up(
    backends: Annotated[str, typer.Option(help="comma-separated backends, or 'all'")] = "arq",
    workers: Annotated[int, params.option("workers")] = params.default("workers"),
    concurrency: Annotated[int, params.option("concurrency")] = params.default("concurrency"),
    redis_url: Annotated[str | None, params.option("redis_url")] = params.default("redis_url"),
    redis_fsync: Annotated[str, params.option("redis_fsync")] = params.default("redis_fsync"),
    broker: Annotated[str | None, params.option(
        "broker", help="broker for every backend (default: each backend's own, the first of its brokers in "
                       "`taskbench backends`: redis, or postgres for the PostgreSQL queues)")] = None,
    broker_url: Annotated[str | None, params.option("broker_url")] = params.default("broker_url"),
    postgres_durability: Annotated[str, params.option("postgres_durability")] = params.default(
        "postgres_durability"),
    host: Annotated[str, typer.Option(help="bind address of the APIs and dashboards")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65000, help="first port; the others follow")] = 8000,
    prometheus: Annotated[bool | None, typer.Option(help="start Prometheus (default: if installed)")] = None,
    prometheus_port: Annotated[int, typer.Option(min=1, max=65535)] = 9090,
    auth: Annotated[str | None, typer.Option(help="USER:PASSWORD for the dashboards beyond loopback")] = None,
    output: Annotated[Path, typer.Option(help="folder for logs and Prometheus data")] = Path("results"),
) -> None:
    """Start the live stack (Redis, brokers, APIs, workers, dashboards, Prometheus), print its URLs, stop on Ctrl-C."""
    from rich.console import Console
    from rich.live import Live

    from taskbench.harness import HarnessError
    from taskbench.harness.commands.up import Up, UpConfig, live_table

    console = Console()
    try:
        names = backend_names(backends, broker)
        config = UpConfig(backends=tuple(names), workers=workers, concurrency=concurrency, redis_url=redis_url,
                          redis_fsync=redis_fsync, broker=broker, broker_url=broker_url,
                          postgres_durability=postgres_durability, host=host, port=port, prometheus=prometheus,
                          prometheus_port=prometheus_port, auth=auth, output=output)
    except ValueError as exc:
        fail(str(exc))

    interrupt_on_signals()
    stack_up = Up(config, say=say_on(console))
    live: Live | None = None

    def show(stack: Stack, rows: list[dict[str, Any]]) -> None:
        nonlocal live
        if live is None:
            for url in stack.urls:
                console.print(f"{url.name:28} {url.url}")
            console.print("[dim]Ctrl-C stops everything[/]")
            live = Live(live_table(rows, stack.note), console=console, auto_refresh=False)
            live.start()
        live.update(live_table(rows, stack.note), refresh=True)

    try:
        stack_up.serve_forever(show)
    except HarnessError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()
    console.print("stopped; no process left running")
