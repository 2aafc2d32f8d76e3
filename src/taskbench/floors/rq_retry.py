"""Floor of ``rq-retry``: the ``rq`` floor with every job enqueued with ``Retry(max=3)``, as the backend does."""

from __future__ import annotations

from fastapi import FastAPI

from taskbench.floors import rq


def create_app() -> FastAPI:
    return rq.create_app(retry=True, name="rq-retry")
