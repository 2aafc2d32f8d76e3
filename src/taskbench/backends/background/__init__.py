"""FastAPI's BackgroundTasks: the task runs in the API process after the response, no queue."""

from taskbench.backends.declaration import AT_MOST_ONCE, BackendInfo, Delivery

BACKENDS = (
    BackendInfo(
        name="background",
        port=8001,
        rank=0,
        summary="FastAPI BackgroundTasks: runs in the API process after the response, no queue",
        durable=False,
        has_worker=False,
        default_delivery=Delivery(guarantee=AT_MOST_ONCE,
                                  recovery="none: a task lives in the API process until it ran",
                                  source="taskbench/backends/background/backend.py (Starlette's BackgroundTasks)"),
    ),
)
