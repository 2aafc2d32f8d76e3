"""redis-py's own reconnect settings for a worker that must outlive a broker restart."""

from __future__ import annotations

from typing import Any

#: attempts with exponential backoff (50 ms doubling, at most 2 s apart): about 30 s of broker downtime
RETRIES = 20


def reconnecting() -> dict[str, Any]:
    """``retry`` and ``retry_on_error`` for a redis-py client or pool of a worker.

    Without them a lost connection, or a restarted Redis still loading its AOF (``LOADING``), fails
    the command at once: arq's worker exits, SAQ's loses the task that was processing a job (found by
    ``--fault restart-broker``). The API keeps redis-py's defaults: a failed enqueue is a 503 with an
    unknown outcome, never a silent second attempt.
    """
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError

    return {"retry": Retry(ExponentialBackoff(cap=2.0, base=0.05), RETRIES),
            "retry_on_error": [ConnectionError, TimeoutError, BusyLoadingError]}
