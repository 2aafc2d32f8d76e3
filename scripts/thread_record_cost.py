"""What one ledger record costs a thread of a thread-run library (Celery, Dramatiq, Huey), apart from any
library: ``--threads`` threads each make ``--records`` records through ``ledger_thread.ThreadRecords`` (one
blocking round trip each, a connection a thread), and this prints the process's CPU and the wall time a
record. Use a private Redis on another core for clean figures, e.g.::

    redis-server --port 6391 --save '' --appendonly no --daemonize yes --pidfile /tmp/r.pid
    taskset -cp 1 $(cat /tmp/r.pid)
    taskset -c 0 .venv/bin/python scripts/thread_record_cost.py redis://127.0.0.1:6391/0 --threads 10

It writes only the ledger keys under ``tbcost:<pid>:``, which it deletes. docs/benchmarks.md has what it
measured ("Tasks of the thread-run libraries run in their own thread").
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import redis

from taskbench.ledger import Ledger
from taskbench.ledger_thread import thread_records_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("redis_url")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--records", type=int, default=20_000, help="records a thread")
    parser.add_argument("--confirm-later", action="store_true",
                        help="read each record's reply at the thread's next record (as Huey's worker does)")
    args = parser.parse_args()
    ledger = Ledger(f"tbcost:{os.getpid()}:")
    records = thread_records_for(ledger, args.redis_url, confirm_later=args.confirm_later)
    if records is None:
        raise SystemExit("a TLS URL: the thread records do not speak it")

    def work(thread: int) -> None:
        for i in range(args.records):
            records.record(f"{thread}-{i}", 1.0, 2.0, 3.0)

    try:
        records.record("warm-up", 1.0, 2.0, 3.0)  # the thread pool's threads connect on their first record
        cpu, wall = time.process_time(), time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(work, range(args.threads)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        records.close()
        client = redis.Redis.from_url(args.redis_url)
        client.delete(ledger.count_key, ledger.times_key)
        client.close()
    total = args.threads * args.records
    mode = "confirmed later" if args.confirm_later else "each answered before the next"
    print(f"{args.threads} thread(s), {mode}, {total} records: CPU {1e6 * cpu / total:.1f} µs a record, "
          f"wall {1e6 * wall / total:.1f} µs a record")


if __name__ == "__main__":
    main()
