"""How a process records its executions: one seam, :class:`Recorder`, whatever the way inside (awaited on the
loop, from a library's thread, spooled; :mod:`.seam` says which, and why), and :class:`ChildRecorder` for a
forked child, which has no loop."""

from taskbench.ledger.recording.forked import ChildRecorder
from taskbench.ledger.recording.seam import Recorder, Threading, ledger_apart

__all__ = ["ChildRecorder", "Recorder", "Threading", "ledger_apart"]
