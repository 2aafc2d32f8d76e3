"""Floor of ``rq-retry``: the ``rq`` floor with every job enqueued with ``Retry(max=3)``, as the backend does."""

from __future__ import annotations

from fastapi import FastAPI

from taskbench.backends.rq import floor


def create_app() -> FastAPI:
    return floor.create_app(retry=True, name="rq-retry")
