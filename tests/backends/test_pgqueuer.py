"""PgQueuer's pieces that need no server: its floor names the run's schema as the backend does, and
``--pgqueuer-heartbeat-timeout`` defaults to the library's own heartbeat_timeout.

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
    from taskbench.backends import _postgres, pgqueuer
    from taskbench.floors import pgqueuer as floor
    from taskbench.settings import Settings

    for run in ("manual", "t-pgq-1", "A.b_c", "x" * 64, "test-0123456789ab"):
        assert floor.schema(run) == _postgres.schema(Settings(run_id=run)), run
        names = pgqueuer.db_settings(Settings(run_id=run))
        assert names.db_schema == names.channel == _postgres.schema(Settings(run_id=run)), names

    from taskbench import params
    assert params.default("pgqueuer_heartbeat_timeout") == pgqueuer.LIBRARY_HEARTBEAT_TIMEOUT
    print("ok")
""")


def test_schema_channel_and_heartbeat_default() -> None:
    python = str(ensure_env(backends.info("pgqueuer").extra, quiet=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKBENCH_", "PGQUEUER_"))}
    out = subprocess.run([python, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False,
                         env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
