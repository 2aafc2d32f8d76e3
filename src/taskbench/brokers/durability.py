"""Whether a broker's configuration keeps an acknowledged task across a restart of the broker.

One rule for the API's ``durable`` answer and the result's ``durable`` column, decided from what the
broker is configured to do (Redis: its ``appendonly``/``appendfsync`` as the server reports them),
never from the library's name alone. A backend that is not durable at all (``background``) or an
``after-response`` enqueue stays not durable whatever the broker does.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the fsync policies of the broker Redis's AOF (``--redis-fsync``); ``none``: no persistence at all
FSYNC_POLICIES = ("always", "everysec", "no", "none")


@dataclass(frozen=True)
class Durability:
    durable: bool
    #: what the broker's configuration keeps across its restart, in words (the result's ``durability``)
    text: str


def of_redis(appendonly: str | None, appendfsync: str | None) -> Durability:
    """From the broker Redis's ``CONFIG GET appendonly appendfsync`` (None: it would not say)."""
    if appendonly is None:
        return Durability(False, "unknown: the broker Redis did not report its persistence (CONFIG GET refused)")
    if appendonly != "yes":
        return Durability(False, "none: the broker Redis has no AOF; a restart loses every queued task")
    if appendfsync == "always":
        return Durability(True, "AOF fsync always: every acknowledged write is on disk")
    if appendfsync == "everysec":
        return Durability(False, "AOF fsync everysec: a crash of the broker may lose the last ~1 s of tasks")
    return Durability(False, f"AOF fsync {appendfsync}: the OS decides when tasks reach the disk")


def of_postgres(fsync: str | None, synchronous_commit: str | None) -> Durability:
    """From the broker PostgreSQL's ``SHOW fsync`` and ``SHOW synchronous_commit`` (None: it would not say)."""
    if fsync is None or synchronous_commit is None:
        return Durability(False, "unknown: the broker PostgreSQL did not report fsync/synchronous_commit")
    if fsync != "on":
        return Durability(False, "fsync off: a crash of the PostgreSQL server may lose or corrupt any task")
    if synchronous_commit == "off":
        return Durability(False, "synchronous_commit off: a crash of the PostgreSQL server may lose the last "
                                 "commits (up to 3 × wal_writer_delay)")
    return Durability(True, f"fsync on, synchronous_commit {synchronous_commit}: a committed task is on disk")


#: RabbitMQ and NATS as the backends configure them (see each backend module): celery a durable classic
#: queue, persistent messages and confirm_publish; taskiq and faststream quorum queues, persistent
#: messages on a publisher-confirm channel; faststream on NATS a JetStream stream with file storage
#: (the server's default) and publishes that wait for JetStream's ack
BY_CONFIGURATION = {
    "rabbitmq": Durability(True, "durable queue, persistent messages, publisher confirms"),
    "nats": Durability(True, "JetStream stream with file storage, acknowledged publishes"),
}


def of_case(backend_durable: bool, enqueue_mode: str, broker: Durability, *, unsafe: str = "") -> Durability:
    """A case's durability: the backend's (a queue at all), the enqueue mode's, then the broker's.

    ``unsafe``: why the backend's wiring keeps nothing (an unsafe seed wiring), said instead of "no queue".
    """
    if not backend_durable:
        return Durability(False, f"unsafe wiring: {unsafe}" if unsafe else "no queue: tasks live in the API process")
    if enqueue_mode != "awaited":
        return Durability(False, "after-response enqueue: the 2xx comes before the broker holds the task")
    return broker
