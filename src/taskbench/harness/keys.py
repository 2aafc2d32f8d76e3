"""Deleting a run's keys from Redis: its prefix and the backend library's own key patterns."""

from __future__ import annotations

from typing import Any

from taskbench import backends


def delete_run_keys(client: Any, run_id: str, backend: backends.BackendInfo,
                    broker: Any = None) -> tuple[list[str], int]:
    """Delete the run's keys (its prefix and the library's own key patterns); never anything else.

    ``client`` is the ledger's Redis; ``broker`` the broker's, when it is another server (the
    library's keys live there, and some libraries name their queues under the run prefix too).
    """
    prefix = f"taskbench:{run_id}:*"
    owned = backend.owned_key_patterns(run_id)
    plan = [(client, [prefix, *owned])] if broker is None else [(client, [prefix]), (broker, [prefix, *owned])]
    deleted = sum(_unlink(server, pattern) for server, patterns in plan for pattern in patterns)
    return [prefix, *owned], deleted


def _unlink(client: Any, pattern: str) -> int:
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            deleted += int(client.unlink(*batch))
            batch.clear()
    if batch:
        deleted += int(client.unlink(*batch))
    return deleted
