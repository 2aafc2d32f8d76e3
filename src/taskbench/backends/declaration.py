"""What a backend declares: its promise across a worker's death and the facts the harness needs.

Each backend package (``taskbench/backends/<library>/__init__.py``) declares one or more
:class:`BackendInfo` in ``BACKENDS`` without importing its library; the registry discovers them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final, Literal

from taskbench.backends import bounds as _bounds
from taskbench.backends.bounds import Bound
from taskbench.backends.options import LibraryOptions, NoOptions

AT_LEAST_ONCE: Final = "at-least-once"
AT_MOST_ONCE: Final = "at-most-once"


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """What a backend on one broker promises across a worker's death, as taskbench configures it: the
    rule a fault case is judged by (``taskbench backends``, docs/backends.md, every fault result)."""

    #: ``at-least-once``: a dead worker's task runs again (a loss fails the case, a duplicate is a figure);
    #: ``at-most-once``: it may be lost, never run twice (a duplicate fails the case, a loss is a figure)
    guarantee: str = AT_LEAST_ONCE
    #: how a dead worker's task comes back, or why it does not: the mechanism and its wait
    recovery: str = ""
    #: seconds before a dead worker's task comes back, when a setting of the library's own sets it rather
    #: than ``--task-timeout`` (the drain waits that long for it)
    after: float | None = None
    #: where the recovery (or its absence) is in the library's source, or its documentation
    source: str = ""
    #: the known windows of the guarantee under each fault (:mod:`taskbench.backends.bounds`)
    bounds: tuple[Bound, ...] = ()

    def __post_init__(self) -> None:
        if self.guarantee not in (AT_LEAST_ONCE, AT_MOST_ONCE):
            raise ValueError(f"unknown delivery guarantee {self.guarantee!r}")

    def all_bounds(self) -> tuple[Bound, ...]:
        """The guarantee as a bound (at-least-once allows duplicates, at-most-once losses), then the
        windows: the whole promise in the form a verdict reads."""
        if self.guarantee == AT_LEAST_ONCE:
            own = Bound(figure=_bounds.DUPLICATED, source=self.source or "docs/backends.md",
                        text="duplicates allowed (at-least-once): a task whose worker died after it ran and "
                             "before its ack runs again")
        else:
            own = Bound(figure=_bounds.LOST, source=self.source or "docs/backends.md",
                        text="losses allowed (at-most-once): a dead worker's task is not run again")
        return (own, *self.bounds)


#: the promise of a backend whose library has a setting that changes it: the broker and the library's
#: options (its ``Options`` model, the library's defaults unless given) -> what it promises
Promise = Callable[[str, Any], Delivery]

#: where a backend's tasks run, which decides how the ledger records an execution (the same way for
#: every backend of a model): on the worker's event loop, in threads of the library's, in forked children
Threading = Literal["loop", "threads", "forked"]


@dataclass(frozen=True, kw_only=True)
class BackendInfo:
    """What the harness knows of a backend without importing its library."""

    name: str
    summary: str
    #: a 2xx from the API means a broker holds the task (it survives the API process)
    durable: bool = True
    #: tasks run in separate worker processes
    has_worker: bool = True
    #: brokers the backend can use; the first is the default
    brokers: tuple[str, ...] = ("redis",)
    #: broker -> what the backend promises there across a worker's death; a broker not named here:
    #: ``default_delivery``
    delivery: Mapping[str, Delivery] = field(default_factory=dict)
    default_delivery: Delivery = Delivery()
    #: the library's settings, one typed model with the library's defaults and bounds
    #: (``--option <package>.KEY=VALUE``, ``[options.<package>]`` in a scenario file)
    options: type[LibraryOptions] = NoOptions
    #: the promise under the options' values: when set, it replaces ``delivery`` and ``default_delivery``
    promise: Promise | None = None
    #: Redis key patterns outside the run prefix that the library creates; ``{run_id}`` is filled
    key_patterns: tuple[str, ...] = ()
    #: the library's own web dashboard, run by ``taskbench dashboard`` (``taskbench up`` starts it)
    dashboard: str | None = None
    #: with ``idempotency`` on, the library refuses a known task id for the whole run by itself (the
    #: producer raises DuplicateTask), so an awaited enqueue needs no claim of the API's
    remembers_ids: bool = False
    #: non-empty: why this wiring is unsafe for a task queue. An unsafe backend reproduces a seed's
    #: mistake so that its cost is measured: never a default (``--backends all`` leaves it out), marked
    #: in ``taskbench backends`` and in every result; the lost and duplicated tasks it causes are the
    #: case's figures, not its failure
    unsafe: str = ""
    #: every worker process gets every task (a broadcast): the drain waits until the executions stop
    #: coming instead of until each task ran once
    fans_out: bool = False
    #: the backend prepares its broker once per run (``PreparesBroker``: a PostgreSQL queue's schema)
    prepares_broker: bool = False
    #: where the tasks run: the ledger records an execution the one way of that model
    threading: Threading = "loop"
    #: the library's setting that ends a running task once ``--task-timeout`` has passed, as taskbench wires it
    #: ("": none ends it): the audit names it beside the tasks that started and never finished
    time_limit: str = ""
    #: the package under ``taskbench.backends`` (the library: its extra, its options' prefix) and the
    #: variant's suffix of its modules (``backend_<variant>.py``, ``floor_<variant>.py``); set by the registry
    package: str = ""
    variant: str = ""
    #: the order in ``taskbench backends`` and ``--backends all`` (lower first)
    rank: int = 100
    #: its API's host port in deploy/docker-compose.yml (0: not deployed, as an unsafe seed wiring)
    port: int = 0

    @property
    def extra(self) -> str:
        return self.package or self.name

    def _module(self, kind: str) -> str:
        suffix = f"_{self.variant}" if self.variant else ""
        return f"taskbench.backends.{self.package or self.name}.{kind}{suffix}"

    @property
    def module(self) -> str:
        """The module of the backend's producer and worker (it imports the library)."""
        return self._module("backend")

    @property
    def floor(self) -> str | None:
        """The module of the library's minimal app, as its documentation shows it (``taskbench overhead``);
        None for a wiring that has none (a seed's unsafe one)."""
        module = self._module("floor")
        return module if _module_exists(module) else None

    @property
    def published(self) -> str:
        """The module of the library's published no-op benchmark, as a script (``taskbench parity``)."""
        return f"taskbench.backends.{self.package or self.name}.published"

    def library_options(self, given: Mapping[str, Any] | LibraryOptions | None = None) -> LibraryOptions:
        """The library's options: ``given`` validated by its model, the library's defaults for the rest."""
        if isinstance(given, LibraryOptions):
            return given
        return self.options.model_validate(dict(given or {}))

    def delivery_on(self, broker: str, settings: Mapping[str, Any] | LibraryOptions | None = None) -> Delivery:
        """What the backend promises on ``broker`` across a worker's death, under ``settings`` (the
        library's options as a run gives them; a name left out: the library's default)."""
        if self.promise is None:
            return self.delivery.get(broker, self.default_delivery)
        return self.promise(broker, self.library_options(settings))

    @property
    def promise_settings(self) -> tuple[str, ...]:
        """The options that change the promise (every case records their values)."""
        return self.options.promise_fields

    @property
    def redelivers(self) -> bool:
        """A task whose worker died mid-task runs again, on the backend's default broker."""
        return self.has_worker and self.delivery_on(self.brokers[0]).guarantee == AT_LEAST_ONCE

    @property
    def implemented(self) -> bool:
        return _module_exists(self.module)

    def owned_key_patterns(self, run_id: str) -> list[str]:
        return [p.format(run_id=run_id) for p in self.key_patterns]




#: an AMQP queue's unacknowledged deliveries go back to the queue when their channel closes
AMQP_REQUEUE: Final = ("RabbitMQ docs, Consumer Acknowledgements (unacked deliveries are requeued when their "
                       "channel closes); the ack after the task")


@cache
def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
