"""Whether a broker's configuration keeps an acknowledged task across a restart of the broker.

One rule for the API's ``durable`` answer and the result's ``durable`` column, decided from what the
broker is configured to do, never from the library's name alone. Each broker states its own part
(:meth:`taskbench.brokers.base.Broker.read_durability`: Redis's ``appendonly``/``appendfsync`` and
PostgreSQL's ``fsync``/``synchronous_commit`` as the server reports them, RabbitMQ's and NATS's as the
backends configure them). A backend that is not durable at all (``background``) or an
``after-response`` enqueue stays not durable whatever the broker does (:func:`of_case`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Durability:
    durable: bool
    #: what the broker's configuration keeps across its restart, in words (the result's ``durability``)
    text: str


def of_case(backend_durable: bool, enqueue_mode: str, broker: Durability, *, unsafe: str = "") -> Durability:
    """A case's durability: the backend's (a queue at all), the enqueue mode's, then the broker's.

    ``unsafe``: why the backend's wiring keeps nothing (an unsafe seed wiring), said instead of "no queue".
    """
    if not backend_durable:
        return Durability(False, f"unsafe wiring: {unsafe}" if unsafe else "no queue: tasks live in the API process")
    if enqueue_mode != "awaited":
        return Durability(False, "after-response enqueue: the 2xx comes before the broker holds the task")
    return broker
