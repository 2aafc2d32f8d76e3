"""Settings shared by the reference service and the workers, read from TASKBENCH_* variables."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from taskbench import brokers

EnqueueMode = Literal["awaited", "after-response"]

#: a run id: a folder under --output, a Redis key prefix, a Kubernetes label. Letters, digits, ``_``, ``.``
#: and ``-``, never starting with ``.`` or ``-``: so never ``..``, a hidden folder, a path or an option
RUN_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
RUN_ID_RULE = "1 to 64 letters, digits, '_', '.' or '-', not starting with '.' or '-'"


def check_run_id(run_id: object, where: str = "run id") -> str:
    """``run_id`` if it is a valid run id (:data:`RUN_ID_PATTERN`), else a one-line ``ValueError``: a run id
    read from a file is checked as one typed on the command line, before it names a folder."""
    if not isinstance(run_id, str) or not re.fullmatch(RUN_ID_PATTERN, run_id):
        shown = repr(run_id) if len(repr(run_id)) <= 80 else repr(run_id)[:77] + "..."
        raise ValueError(f"{where} {shown}: a run id is {RUN_ID_RULE}")
    return run_id


#: a machine's local server of each broker that has one (RabbitMQ, NATS): from the broker registry
DEFAULT_BROKER_URLS: dict[str, str] = {b.name: b.local_url for b in brokers.BROKERS.values() if b.local_url}


class Settings(BaseSettings):
    """What one API or worker process needs to know about its run.

    The harness passes these to every process it starts as environment variables, so that a
    process started by hand (``taskbench serve`` / ``taskbench worker``) behaves the same way.
    """

    # allow_inf_nan off: a bound alone would let TASKBENCH_X=nan through a field that has none
    model_config = SettingsConfigDict(env_prefix="TASKBENCH_", frozen=True, extra="ignore", allow_inf_nan=False)

    backend: str = "background"
    redis_url: str = "redis://127.0.0.1:6379/0"
    run_id: str = "manual"
    enqueue_mode: EnqueueMode = "awaited"
    # where tasks travel; the ledger is always on redis_url
    broker: str = "redis"  # a name of taskbench.brokers.BROKERS
    broker_url: str | None = None
    # workload parameters (the same for every task of a run)
    io_delay: float = Field(default=0.0, ge=0.0, le=60.0, description="seconds of simulated I/O")
    cpu_iterations: int = Field(default=200_000, ge=0, le=100_000_000)
    threads: int = Field(default=3, ge=1, le=1024, description="io/thread pool size (seed: 3)")
    processes: int = Field(default=3, ge=1, le=256, description="cpu/process pool size (seed: 3)")
    task: str | None = Field(default=None, description="a user's task, module:callable (taskbench.user_task)")
    task_path: str | None = Field(default=None, description="folders put first on sys.path for the user's task")
    ledger: bool = Field(
        default=True, description="record every execution; off only to measure the ledger's own cost"
    )
    ledger_spool: str = Field(
        default="", max_length=4096,
        description="a folder the harness keeps for the workers' spooled ledger records "
                    "(taskbench.ledger.recording.spool); "
                    "set by the harness for the workers it starts")
    ledger_spool_loop: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="spool the records made on a worker's loop too (where the ledger's Redis is not the broker): "
                    "auto and on = wherever the harness keeps a spool, the same for every backend; off = awaited")
    # worker parameters
    concurrency: int = Field(default=10, ge=1, le=10_000, description="tasks at once per worker")
    shutdown_timeout: float = Field(default=10.0, ge=0.0, le=600.0)
    task_timeout: float = Field(
        default=60.0, ge=1.0, le=86_400.0,
        description="longest a task may run; also how long a task of a dead worker waits to be retried",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="the backend's library settings as JSON (its package's Options model validates them)")
    producer_threads: int = Field(
        default=32, ge=1, le=1024,
        description="threads of a synchronous library's producer in the API (its enqueue blocks)")
    redis_max_connections: int = Field(
        default=256, ge=4, le=100_000,
        description="Redis connections per process; tasks wait for a free one instead of failing",
    )
    # monitoring: every process serves /metrics; loopback unless told otherwise
    metrics: bool = Field(
        default=True, description="HTTP request metrics on the API (task and enqueue metrics are always on)"
    )
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=0, ge=0, le=65535, description="a worker's /metrics port; 0 picks a free one")
    # service parameters
    max_body_bytes: int = Field(default=16_384, ge=256, le=10_485_760)
    header_timeout: float = Field(
        default=10.0, ge=0.1, le=600.0,
        description="seconds a connection may take to send a request's headers; then it is closed",
    )
    body_timeout: float = Field(
        default=10.0, ge=0.1, le=600.0,
        description="seconds a request's body may take to arrive after its headers; then 408 and the close",
    )
    write_timeout: float = Field(
        default=10.0, ge=0.1, le=600.0,
        description="seconds an answer may wait for a client that reads nothing; then the connection is dropped",
    )
    max_header_bytes: int = Field(
        default=16_384, ge=1_024, le=1_048_576,
        description="request line and headers; a larger head gets 431 and the connection is closed",
    )
    max_connections: int = Field(
        default=10_240, ge=16, le=1_000_000,
        description="connections the API holds at once (the driver's --users go to 10,000); one more gets 503",
    )
    enqueue_timeout: float = Field(
        default=5.0, ge=0.1, le=600.0,
        description="seconds the API waits for the broker to take a task; then 503, outcome unknown",
    )
    gc_freeze: bool = Field(
        default=True,
        description="gc.freeze() once a process has started: full collections skip the start-up heap "
                    "(off to measure its effect)",
    )
    idempotency: bool = Field(
        default=True,
        description="task_id is an idempotency key: a known id is answered 409 and never enqueued again "
                    "(off only to measure its cost)",
    )

    @field_validator("run_id")
    @classmethod
    def _valid_run_id(cls, value: str) -> str:
        return check_run_id(value)  # the rule a run id read from a file is held to (taskbench collect)

    @field_validator("broker")
    @classmethod
    def _known_broker(cls, value: str) -> str:
        brokers.info(value)  # UnknownBrokerError (a ValueError): pydantic names the field
        return value

    @property
    def broker_address(self) -> str:
        """The broker's URL: ``broker_url``, else Redis's, else the local default for the broker."""
        if self.broker_url:
            return self.broker_url
        if brokers.info(self.broker).can_be_ledger:
            return self.redis_url
        local = brokers.info(self.broker).local_url
        if local is None:
            raise ValueError(f"the {brokers.info(self.broker).label} broker needs its URL (TASKBENCH_BROKER_URL)")
        return local

    @property
    def own_broker_redis(self) -> bool:
        """The broker is a Redis server apart from the ledger's: it needs a client (and a check) of its own."""
        return brokers.info(self.broker).can_be_ledger and self.broker_address != self.redis_url

    @property
    def metrics_key(self) -> str:
        """Hash of component -> its /metrics URL: how the harness and ``taskbench up`` find them."""
        return f"{self.prefix}metrics"

    @property
    def ready_key(self) -> str:
        """Hash of component -> readiness time: a worker sets it when it consumes; the harness waits on it."""
        return f"{self.prefix}ready"

    @property
    def prefix(self) -> str:
        """Key prefix of this run: everything the run writes to Redis starts with it."""
        return f"taskbench:{self.run_id}:"
