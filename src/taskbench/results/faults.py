"""The result vocabulary: what an injected fault did and cost, and the promise it is judged by."""

from __future__ import annotations

from taskbench.results.model import Model


class FaultSecond(Model):
    """One second of a fault case, counted from the load's start: 2xx answers, tasks finished."""

    t: int
    accepted: int = 0
    executed: int = 0


class PromiseBound(Model):
    """One known window of a promise, resolved for a case (``taskbench.backends.bounds.Bound``): up to
    ``tasks`` (× the kills where ``per_kill``; None: any number) tasks may show ``figure`` (lost,
    duplicated, no recovery) and the promise is kept."""

    figure: str
    tasks: int | None = None
    per_kill: bool = False
    text: str = ""
    source: str = ""

    def limit(self, kills: int) -> int | None:
        return None if self.tasks is None else self.tasks * (max(kills, 1) if self.per_kill else 1)


class Promise(Model):
    """What a backend's configuration promises across a fault: the exit rule of a fault case."""

    #: a task answered 2xx runs even if a component crashes (a loss fails the case)
    keeps_accepted: bool = True
    #: a task runs at most once, or duplicates are removed (a duplicate fails the case)
    no_duplicates: bool = False
    text: str = ""
    #: what the case's fault may cost and still keep the promise (none in older results: the two flags
    #: above decide)
    bounds: list[PromiseBound] = []


class BrokerRestart(Model):
    """``restart-broker``: the broker server stopped and started again on the same port and data."""

    signal: str  # SIGKILL (a crash) or SIGTERM (a clean stop)
    port: int
    fsync: str  # Redis: its AOF policy (always | everysec | no | none); RabbitMQ/NATS: what their store keeps
    old_pid: int
    broker: str = "redis"  # redis | rabbitmq | nats (results before it: redis)
    new_pid: int | None = None
    exit_code: int | None = None
    down_at: float | None = None  # wall clock: the old server was gone (its pid reaped, its port refused)
    up_at: float | None = None  # wall clock: the new server answered PING
    down_s: float | None = None
    #: what was observed that proves it: the old pid gone, the port refusing, a new pid answering
    proof: list[str] = []
    #: from the ledger: executed tasks the driver sent before the broker went down (0: the load had not
    #: begun), and those of them that started after it was back (held across the restart, or still in
    #: flight to the API when it went down: the send time is the driver's)
    sent_before: int | None = None
    sent_before_ran_after: int | None = None


class FaultRecord(Model):
    """An injected fault and what it cost (times in seconds after the fault).

    Fields after ``executing_again_s`` came with the fault matrix; files written before it load with
    their defaults.
    """

    fault: str
    target: str = ""
    injected: bool = False
    #: injected after the load had ended, while the drain worked off the backlog (a short load)
    during_drain: bool = False
    note: str | None = None
    error: str | None = None
    at: float | None = None
    killed_pid: int | None = None
    killed_exit_code: int | None = None
    restarted_pid: int | None = None
    ready_after_s: float | None = None
    #: None while injected means "never" (the rate did not come back)
    accepting_again_s: float | None = None
    executing_again_s: float | None = None  # back to 50 % of the pre-fault execution rate
    #: the load's start (wall clock): second 0 of ``timeline``
    load_start: float | None = None
    #: the load's first request (wall clock, from the ledger): the driver starts up after load_start
    first_send: float | None = None
    #: when a fault that lasts (pause, stall) ended
    ended: float | None = None
    #: every kill (wall clock) and how long each restarted process took to be ready
    kills: list[float] = []
    restarts_ready_s: list[float] = []
    #: what was observed that shows the fault happened
    proof: list[str] = []
    first_execution_s: float | None = None  # the first task started after the fault, finished
    executing_90_s: float | None = None  # back to 90 % of the pre-fault execution rate
    pre_fault_rate: float | None = None  # executions per second before the fault
    post_recovery_rate: float | None = None  # over an equal window from the 90 % (else 50 %) point
    throughput_ratio: float | None = None  # post_recovery_rate / pre_fault_rate
    recovered: bool | None = None  # None: no pre-fault rate to judge by
    promise: Promise | None = None
    #: the figures the fault cost inside the promise's bounds, each with the bound that allows it
    within_bounds: list[str] = []
    timeline: list[FaultSecond] = []
    broker_restart: BrokerRestart | None = None  # restart-broker only
