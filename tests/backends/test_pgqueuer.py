"""PgQueuer's pieces that need no server: its floor names the run's schema as the backend does, and
``--option pgqueuer.heartbeat_timeout`` defaults to the library's own heartbeat_timeout.

Runs in the pgqueuer environment (the base one has no pgqueuer): one short script.
"""

from __future__ import annotations

import os
import subprocess
import textwrap

from taskbench import backends
from taskbench.harness.processes.envs import ensure_env

SCRIPT = textwrap.dedent("""
    import os
    from taskbench.backends import _postgres
    from taskbench.backends.pgqueuer import backend as pgqueuer, floor
    from taskbench.settings import Settings

    for run in ("manual", "t-pgq-1", "A.b_c", "x" * 64, "test-0123456789ab"):
        assert floor.schema(run) == _postgres.schema(Settings(run_id=run)), run
        names = pgqueuer.db_settings(Settings(run_id=run))
        assert names.db_schema == names.channel == _postgres.schema(Settings(run_id=run)), names

    import inspect
    from datetime import timedelta
    from pgqueuer.qm import QueueManager
    from taskbench.backends.pgqueuer import LIBRARY_HEARTBEAT_TIMEOUT, Options
    assert Options().heartbeat_timeout == LIBRARY_HEARTBEAT_TIMEOUT
    library = inspect.signature(QueueManager.run).parameters["heartbeat_timeout"].default
    assert library == timedelta(seconds=LIBRARY_HEARTBEAT_TIMEOUT), library
    print("ok")
""")


def test_schema_channel_and_heartbeat_default() -> None:
    python = str(ensure_env(backends.info("pgqueuer").extra, quiet=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKBENCH_", "PGQUEUER_"))}
    out = subprocess.run([python, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False,
                         env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
