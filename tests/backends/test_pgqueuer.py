"""PgQueuer's pieces that need no server: its floor names the run's schema as the backend does, and
the heartbeat timeout is ``--task-timeout`` unless ``TASKBENCH_PGQUEUER_RETRY_TIMER`` sets it (0: the
library's 30 s).

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

    for raw, expected in ((None, 30.0), ("", 30.0), ("0", 30.0), ("7.5", 7.5)):
        os.environ.pop(pgqueuer.RETRY_TIMER_ENV, None)
        if raw is not None:
            os.environ[pgqueuer.RETRY_TIMER_ENV] = raw
        assert pgqueuer.heartbeat_timeout() == expected, (raw, pgqueuer.heartbeat_timeout())
        assert pgqueuer.heartbeat_timeout(4.0) == (4.0 if not raw else expected), raw
    for raw in ("-1", "soon", "nan"):
        os.environ[pgqueuer.RETRY_TIMER_ENV] = raw
        try:
            pgqueuer.heartbeat_timeout()
        except ValueError as exc:
            assert pgqueuer.RETRY_TIMER_ENV in str(exc), exc
        else:
            raise AssertionError(f"{raw!r} accepted")
    print("ok")
""")


def test_schema_channel_and_retry_timer() -> None:
    python = str(ensure_env(backends.info("pgqueuer").extra, quiet=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKBENCH_", "PGQUEUER_"))}
    out = subprocess.run([python, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False,
                         env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
