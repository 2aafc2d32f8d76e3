"""Deleting a run's keys from Redis: its prefix and the backend library's own key patterns."""

from __future__ import annotations

from typing import Any

from taskbench import backends


def delete_run_keys(client: Any, run_id: str, backend: backends.BackendInfo) -> tuple[list[str], int]:
    """Delete the run's keys (its prefix and the library's own key patterns); never anything else."""
    deleted = 0
    patterns = [f"taskbench:{run_id}:*", *backend.owned_key_patterns(run_id)]
    for pattern in patterns:
        batch: list[bytes] = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += int(client.unlink(*batch))
                batch.clear()
        if batch:
            deleted += int(client.unlink(*batch))
    return patterns, deleted
