"""The ledger's records from a library's threads, spooled to memory the harness can read.

Where a record's reply protects nothing (:class:`taskbench.ledger.recording.Recorder`: a library that
acknowledges nothing once a task returns, and every library's thread pool whenever the
ledger's Redis is not their broker), :mod:`taskbench.ledger.recording.threads` wrote each record to Redis before the
task returned and read the reply later. That write cost a no-op task 25-40 µs of its worker's CPU, 7-11 %
of its drain (docs/benchmarks.md): less for the system call itself than for the interpreter's lock, which a
system call gives up and which the library's other threads then take in turn.

Here a record is a store into a shared memory map of a file of the worker's own (under the folder the
harness names with ``TASKBENCH_LEDGER_SPOOL``): one slot of :data:`SLOT` bytes, its fields (the times and the
increment as doubles, :data:`FIELDS`), task id and workload first and its ready mark last, about 1.5 µs with
no system call and the lock kept. A thread of the worker (:class:`SpoolRecords`) forwards the ready slots
every :data:`HOLD` s while records come, all in one ``EVALSHA`` of :data:`BATCH`, which is given the slots'
bytes as they are and reads each record itself (Redis's Lua ``struct``): the worker's reader finds the ready
slots from their marks, every :data:`SLOT`-th byte, and never looks at a record (0.3 µs a record). Why no
execution the library acknowledged goes unrecorded, and none is counted twice:

* **A worker killed at any moment.** The slot is in the kernel's page cache once stored, before the task
  returns and so before the library acknowledges it; a SIGKILL does not take it back. The worker holds an
  exclusive ``flock`` on each of its files while it lives; the kernel drops it with the process, and the
  harness (:class:`taskbench.ledger.recording.spool.keeper.SpoolKeeper`, in the process that started the
  worker) forwards the ready slots of a file whose lock is free, at once when it stops or kills a process,
  every 0.2 s, and once more when the stack stops. A slot without its mark (a kill between the record and
  the mark) was never a record: its task had not returned.
* **Each record once.** :data:`BATCH` runs every record of a batch and moves the file's offset
  (``P ledger:spool``, by file name) in one script, so Redis holds both or neither; it runs only if the offset
  in Redis is the one the batch starts from (else it answers ``SPOOLAT <offset>`` and the sender goes on from
  there). A reply lost with the connection, the harness and a worker: whoever forwards a slot second finds
  it forwarded.
* **The same order as before.** A record reaches Redis a few milliseconds after its task returned, as with
  replies confirmed later; where the library's acknowledgement goes to the ledger's own Redis and matters
  (a Redis that is both, with Celery or Dramatiq) nothing is spooled: each reply is waited for.

A worker that the harness did not start (no ``TASKBENCH_LEDGER_SPOOL``: a user's own deployment, another
node) has nobody to recover its file after a kill, and records as :mod:`taskbench.ledger.recording.threads` does.
With the ledger off nothing is spooled: ``io/simple``'s INCRBY is the task's effect, not a record.

A file holds :data:`SLOTS` records after a header page that says where they go (the ledger's Redis URL and
keys), so that the harness forwards it without knowing the run; a full one is removed once forwarded and the
next one made. The folder is the harness's own (mode 0700, in ``/dev/shm`` where there is one: memory the
kernel never writes back to a disk; removed with the stack).
"""

from taskbench.ledger.recording.spool.format import SPOOL_ENV
from taskbench.ledger.recording.spool.records import SpoolRecords, spool_records

__all__ = ["SPOOL_ENV", "SpoolRecords", "spool_records"]
