"""SAQ's sweep skips and logs a record that is not a job, and goes on sweeping the others.

Runs in the saq environment (the base one has no saq): a short script against the test Redis, with
the queue named after this test's run, so the ``client`` fixture deletes everything it made.
"""

from __future__ import annotations

import os
import subprocess
import textwrap

import redis

from taskbench import backends
from taskbench.harness.processes.envs import ensure_env

SCRIPT = textwrap.dedent("""
    import asyncio, logging, sys
    from taskbench.backends.saq.backend import _queue
    from taskbench.settings import Settings

    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(levelname)s %(message)s")

    async def main():
        queue = _queue(Settings(), 4)
        await queue.connect()
        try:
            for attempt in range(2):  # a second pass must not raise either, nor log again
                await queue.redis.delete(queue._sweep)  # the lock of one sweep per period
                swept = await queue.sweep(lock=60)
                print("swept", sorted(swept))
        finally:
            await queue.disconnect()

    asyncio.run(main())
""")


def _in_saq_env(script: str, redis_url: str, run_id: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with the saq environment's Python against the test Redis, as this test's run."""
    python = str(ensure_env(backends.info("saq").extra, quiet=True))
    out = subprocess.run(
        [python, "-c", script], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TASKBENCH_REDIS_URL": redis_url, "TASKBENCH_RUN_ID": run_id,
             "TASKBENCH_BACKEND": "saq"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_sweep_skips_a_malformed_record(redis_url: str, run_id: str, client: redis.Redis) -> None:
    active = f"saq:taskbench:{run_id}:saq:active"
    lock = f"saq:taskbench:{run_id}:saq:sweep"
    bad, gone = f"saq:job:taskbench:{run_id}:saq:bad", f"saq:job:taskbench:{run_id}:saq:gone"
    client.rpush(active, bad, gone)
    client.set(bad, b"{not a job")  # gone has no record at all: SAQ's own cleanup sweeps it
    try:
        out = _in_saq_env(SCRIPT, redis_url, run_id)
        lines = out.stdout.splitlines()
        assert lines.count(f"swept ['{gone}']") == 1 and lines.count("swept []") == 1, out.stdout
        warnings = [line for line in lines if line.startswith("WARNING sweep skips")]
        assert len(warnings) == 1 and bad in warnings[0] and "not a job" in warnings[0], out.stdout
        assert [k.decode() for k in client.lrange(active, 0, -1)] == [bad]  # left for a person to see
    finally:
        client.delete(active, bad, gone, lock)


NEVER_STARTED = textwrap.dedent("""
    import asyncio
    from taskbench.backends.saq.backend import _queue
    from taskbench.settings import Settings

    async def main():
        queue = _queue(Settings(), 4)
        await queue.connect()
        try:
            job = await queue.enqueue("never_started", key="never-started", timeout=3)
            # a worker's BLMOVE, then the worker is killed before it writes the status "active"
            await queue.redis.lmove(queue._queued, queue._active, "LEFT", "RIGHT")
            for attempt in range(2):  # the first pass only notes it: maybe a worker is about to write
                await queue.redis.delete(queue._sweep)
                print("swept", await queue.sweep(lock=60, abort=0.5))
            await job.refresh()
            queued = [i.decode() for i in await queue.redis.lrange(queue._queued, 0, -1)]
            active = [i.decode() for i in await queue.redis.lrange(queue._active, 0, -1)]
            print("status", job.status.value, "queued", queued == [job.id], "active", active,
                  "abort key", await queue.redis.exists(job.abort_id))
            await queue.redis.delete(job.id, queue._queued, queue._incomplete, queue._sweep)
        finally:
            await queue.disconnect()

    asyncio.run(main())
""")


def test_a_job_that_never_started_is_requeued_in_one_step(redis_url: str, run_id: str) -> None:
    # SAQ's sweep aborts (out of "active") and re-queues up to 5 s later: a sweeping worker killed in
    # between left the job in no list (lost in the faults scenario's crash loop). A job that never
    # started has no copy to abort: it goes back to "queued" in one transaction
    lines = _in_saq_env(NEVER_STARTED, redis_url, run_id).stdout.splitlines()
    assert lines[0] == "swept []" and lines[1].startswith("swept ['") and "never-started" in lines[1], lines
    assert lines[2] == "status queued queued True active [] abort key 0", lines
