"""``taskbench.scenarios.asgi:app``: the HTTP scenarios' app, built from TASKBENCH_APP_* at import."""

from taskbench.scenarios.apps import create_app

app = create_app()
