"""The task message every backend carries, and the workload names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

WORKLOADS: Final = ("io/simple", "io/sync", "io/thread", "cpu/simple", "cpu/process")
#: what a task id may look like (the API refuses others; the audit calls other ledger keys corrupt)
TASK_ID_PATTERN: Final = r"^[A-Za-z0-9_.:-]{1,64}$"
#: benchmark-only task that does nothing but be recorded: measures a backend's own overhead
NOOP: Final = "noop"
#: a user's own task body (``--workload module:callable``, :mod:`taskbench.user_task`); its route is
#: ``/api/v1/incr/user/task/<backend>`` and its message carries the request's ``payload``
USER_TASK: Final = "user/task"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskMessage:
    """One task: what to run, with the id and enqueue time the ledger audits."""

    task_id: str
    workload: str
    value: int
    enqueued_at: float  # unix seconds: the API and the worker are different processes
    #: a user's task: the JSON object its callable gets (None for the built-in workloads)
    payload: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        # not dataclasses.asdict: it deep-copies field by field, a measurable cost per enqueue
        data = {"task_id": self.task_id, "workload": self.workload, "value": self.value,
                "enqueued_at": self.enqueued_at}
        if self.payload is not None:
            data["payload"] = self.payload
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskMessage:
        return cls(
            task_id=str(data["task_id"]),
            workload=str(data["workload"]),
            value=int(data["value"]),
            enqueued_at=float(data["enqueued_at"]),
            payload=data.get("payload"),
        )
