"""RQ with ``Retry``: the wiring of :mod:`taskbench.backends.rq.backend`, every job enqueued with ``Retry(max=3)``.

RQ's maintenance re-enqueues an abandoned job that has retries left instead of moving it to the failed
registry (``StartedJobRegistry.cleanup``, ``rq/registry.py``): a dead worker's job runs again once its
heartbeat TTL expired and a worker's maintenance ran, which is the at-least-once entry beside ``rq``'s
at-most-once one. A job that raises is retried as well (``Worker.handle_job_failure``).
"""

from __future__ import annotations

from taskbench.backends.rq.backend import RqBackend

backend = RqBackend(retry=True)
