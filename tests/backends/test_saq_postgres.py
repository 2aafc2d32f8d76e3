"""saq-postgres's floor names the run's schema, queue and advisory-lock keyspace as the backend does
(a floor imports no backend code, so the rule is written twice: this test keeps the two together).

Runs in the saq environment (the base one has no saq): one short script.
"""

from __future__ import annotations

import os
import subprocess
import textwrap

from taskbench import backends
from taskbench.harness.processes.envs import ensure_env

SCRIPT = textwrap.dedent("""
    from taskbench.backends import _postgres
    from taskbench.backends.saq import backend_postgres as saq_postgres, floor_postgres as floor
    from taskbench.settings import Settings

    for run in ("manual", "t-1", "A.b_c", "x" * 64, "20261126T101618-8969-0-saq-postgres"):
        s = Settings(run_id=run)
        assert floor._schema(run) == _postgres.schema(s), run
        assert floor._keyspace(run) == saq_postgres.lock_keyspace(s), run
        assert f"tb-{run}" == saq_postgres.queue_name(s), run
        assert -2**31 <= saq_postgres.lock_keyspace(s) < 2**31
    print("ok")
""")


def test_the_floor_names_what_the_backend_names() -> None:
    python = str(ensure_env(backends.info("saq-postgres").extra, quiet=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKBENCH_")}
    out = subprocess.run([python, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
