"""The per-task ledger: proves that every accepted task ran exactly once.

:mod:`.core` writes and reads the records (one Lua script per execution), :mod:`.rows` sorts what Redis holds into
valid rows and corrupt ones, :mod:`.audit` compares them with the ids the driver saw accepted. A process records its
executions through one seam, :class:`taskbench.ledger.recording.Recorder`, which picks the way (awaited on the loop,
from a library's thread, spooled) from where the backend's library runs its tasks. :mod:`.writer` and :mod:`.pipe`
are the wire under it (a pipelined connection of its own; the API's task-id claims use the pipe too).
"""

from taskbench.ledger.audit import SAMPLE, Audit, audit, per_second
from taskbench.ledger.core import RECORD, RECORD_EXECUTION, RECORD_EXECUTION_SHA, RECORD_SHA, Ledger, failure_name
from taskbench.ledger.rows import Outcomes, Rows, sort_rows

__all__ = ["RECORD", "RECORD_EXECUTION", "RECORD_EXECUTION_SHA", "RECORD_SHA", "SAMPLE", "Audit", "Ledger",
           "Outcomes", "Rows", "audit", "failure_name", "per_second", "sort_rows"]
