"""The spool's file format: a header page that says where the records go, then slots of :data:`SLOT` bytes, each a
record's fields and its ready mark, and :data:`BATCH`, the script that runs a batch of slots as they are in the
file (:mod:`taskbench.ledger.recording.spool`)."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Final

from taskbench.redaction import redact

#: the variable that names the spool folder (set by the harness: :mod:`.keeper`)
SPOOL_ENV: Final = "TASKBENCH_LEDGER_SPOOL"
#: bytes of a record's slot: its ready mark, then its fields (:data:`FIELDS`), task id and workload
SLOT: Final = 256
#: a slot's fixed fields after its mark: the three times and the increment (doubles), whether there is an
#: increment, the lengths of the task id and of the workload
FIELDS: Final = struct.Struct("<ddddBBB")
#: where a slot's task id starts
HEAD: Final = 1 + FIELDS.size
#: the mark a slot's writer stores last ("R")
READY: Final = 0x52
#: KEYS: count hash, times hash, offsets hash, the tasks' counter; ARGV: the file's name, the slot the batch
#: starts at, the slot after it, then the slots' bytes as they are in the file. The script reads each slot
#: (Redis's Lua ``struct``), so the worker's reader sends a slice of its map without a look at a record; a slot
#: without its mark is skipped (a hole the harness forwards past). Returns the workload of each record whose
#: count went above one.
BATCH: Final = """
local at = redis.call('HGET', KEYS[3], ARGV[1]) or '0'
if at ~= ARGV[2] then return redis.error_reply('SPOOLAT ' .. at) end
local slots = ARGV[4]
local repeats = {}
for base = 1, #slots, {slot} do
  if string.byte(slots, base) == {ready} then
    local enqueued, started, finished, amount, has, idlen, wlen, p = struct.unpack('<ddddBBB', slots, base + 1)
    local id = string.sub(slots, p, p + idlen - 1)
    if has == 1 then redis.call('INCRBY', KEYS[4], string.format('%d', amount)) end
    local runs = redis.call('HINCRBY', KEYS[1], id, 1)
    redis.call('HSET', KEYS[2], id, string.format('%.6f %.6f %.6f', enqueued, started, finished))
    if runs > 1 then repeats[#repeats + 1] = string.sub(slots, p + idlen, p + idlen + wlen - 1) end
  end
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return repeats
""".replace("{slot}", str(SLOT)).replace("{ready}", str(READY))
BATCH_SHA: Final = hashlib.sha1(BATCH.encode(), usedforsecurity=False).hexdigest()
#: bytes of a file's header (its first line says where its records go)
HEADER: Final = 4096
#: records a file holds (16 MiB)
SLOTS: Final = 65536
#: seconds between two batches of a worker while records come: each round costs the worker a wake-up of its
#: thread, the interpreter's lock taken from the library's threads and given back, and a round trip (at
#: 5 ms, 7 % of a no-op thread-pool worker's samples; at 50 ms, 3.7 %: docs/benchmarks.md). A record still reaches
#: Redis within about this long of its task's end; its times are the task's own.
HOLD: Final = 0.05
#: most records in one script
MOST: Final = 2000
#: slots a reader reads first (twice as many each time all were ready)
FIRST_READ: Final = 32
SUFFIX: Final = ".spool"


class SpoolError(RuntimeError):
    """A spool file that cannot be read or forwarded."""


class Target:
    """Where a spool file's records go: the ledger's Redis and keys (the file's first line)."""

    def __init__(self, redis_url: str, count_key: str, times_key: str, counter_key: str, prefix: str) -> None:
        self.redis_url = redis_url
        self.count_key = count_key
        self.times_key = times_key
        self.counter_key = counter_key
        self.offsets_key = f"{prefix}ledger:spool"
        self.prefix = prefix

    def header(self) -> bytes:
        """The file's first line: the URL without its secrets (the harness knows the URLs it gave)."""
        line = json.dumps({"spool": 1, "redis_url": redact(self.redis_url), "prefix": self.prefix,
                           "count": self.count_key, "times": self.times_key,
                           "counter": self.counter_key}).encode() + b"\n"
        if len(line) > HEADER:
            raise SpoolError("the ledger's URL and keys do not fit a spool file's header")
        return line

    @classmethod
    def parse(cls, data: bytes) -> Target:
        try:
            found = json.loads(data[:data.index(b"\n")])
            return cls(str(found["redis_url"]), str(found["count"]), str(found["times"]), str(found["counter"]),
                       str(found["prefix"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SpoolError(f"not a spool header: {data[:200]!r}") from exc

