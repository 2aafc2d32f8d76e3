"""PgQueuer: a PostgreSQL queue table, LISTEN/NOTIFY, FOR UPDATE SKIP LOCKED, a heartbeat timeout."""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import Field

from taskbench.backends.declaration import BackendInfo, Delivery
from taskbench.backends.options import LibraryOptions

#: PgQueuer's own heartbeat_timeout, seconds: the option's default (a test keeps them equal)
LIBRARY_HEARTBEAT_TIMEOUT: Final = 30.0


class Options(LibraryOptions):
    heartbeat_timeout: float = Field(
        default=LIBRARY_HEARTBEAT_TIMEOUT, ge=1, le=86_400,
        description="PgQueuer's heartbeat_timeout: seconds after its last heartbeat that a dead worker's job is "
                    "taken again by any worker (PgQueuer's default: 30)")

    promise_fields: ClassVar[tuple[str, ...]] = ("heartbeat_timeout",)
    quick_recovery: ClassVar[dict[str, Any]] = {"heartbeat_timeout": 3.0}


def _promise(_broker: str, options: Options) -> Delivery:
    timeout = options.heartbeat_timeout
    return Delivery(
        after=timeout,
        recovery=f"any worker's dequeue re-takes a picked job whose heartbeat is older than heartbeat_timeout "
                 f"({timeout:g} s, --option pgqueuer.heartbeat_timeout; PgQueuer's default 30), on a NOTIFY or "
                 f"within dequeue_timeout; no attempt limit",
        source="pgqueuer 1.6 pgqueuer/adapters/persistence/queries.py (the dequeue query re-takes picked jobs past "
               "heartbeat_timeout)")


BACKENDS = (
    BackendInfo(
        name="pgqueuer",
        port=8021,
        rank=100,
        summary="PgQueuer: PostgreSQL queue table, LISTEN/NOTIFY, FOR UPDATE SKIP LOCKED, heartbeat_timeout",
        brokers=("postgres",),
        options=Options,
        promise=_promise,
        prepares_broker=True,
    ),
)
