"""What the API accepts and answers: strict, bounded request bodies and JSON errors that always render.

Strict means no coercion: ``"7"`` and ``true`` are not integers, ``false`` is not a time. Bounded
means every number has a range a benchmark can use: ``enqueued_at`` is a finite unix time between
2000 and 2100 (NaN, ±Infinity and ``1e309`` are refused), so one request cannot put ``inf`` in the
ledger or 1.8e9 s into the queue-wait histogram.
"""

from __future__ import annotations

import math
import uuid
from typing import Annotated, Any, Final, Literal

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from taskbench.messages import TASK_ID_PATTERN

#: unix seconds: 2000-01-01 and 2100-01-01 UTC, the range ``enqueued_at`` must be in
EARLIEST: Final = 946_684_800.0
LATEST: Final = 4_102_444_800.0


def _whole(value: Any) -> Any:
    """``7.0`` is the integer 7, as JSON Schema has it; ``7.5``, ``"7"`` and ``true`` stay refused."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: an integer, strictly: no string, no bool, no fraction
WholeNumber = Annotated[int, BeforeValidator(_whole)]


class TaskIn(BaseModel):
    """Body of ``POST /api/v1/incr/...``; every field has a default, so ``{}`` is a valid task."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    value: WholeNumber = Field(default=1, ge=1, le=1_000_000, description="added to the run's counter")
    task_id: str = Field(
        default_factory=lambda: uuid.uuid4().hex,
        pattern=TASK_ID_PATTERN,
        description="idempotency key, unique per run: a second submission of an id is answered 409 and "
                    "never enqueued again; the ledger audits by it",
    )
    enqueued_at: float | None = Field(
        default=None, ge=EARLIEST, le=LATEST,
        description="unix seconds (finite, 2000..2100); defaults to the time the API received it",
    )


class Accepted(BaseModel):
    status: str
    task_id: str
    backend: str
    mode: str
    durable: bool


class Problem(BaseModel):
    """Every error the API answers itself (404, 413, 503): one sentence."""

    detail: str


class Known(Problem):
    """409: the task id was already submitted in this run; nothing was enqueued."""

    task_id: str
    first: Literal["accepted", "pending", "unknown"] = Field(
        description="the first submission: accepted (the broker holds or held it), pending (its enqueue "
                    "is in flight: ask again), unknown (its enqueue timed out or was never confirmed)")


class Health(BaseModel):
    status: str
    backend: str
    run_id: str
    redis: str
    broker: str = "none"  # the broker checked, e.g. "Redis at 127.0.0.1:6380"; none for background
    durable: bool = False  # the broker's configuration keeps an acknowledged task across its restart
    durability: str = ""


#: the answers of the task route besides 202, for the OpenAPI schema (schemathesis checks them)
TASK_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    400: {"model": Problem, "description": "the body could not be read as JSON (not UTF-8, nested too deep)"},
    404: {"model": Problem, "description": "unknown workload or backend"},
    409: {"model": Known, "description": "the task id was already submitted in this run (it is an "
                                         "idempotency key): not enqueued again"},
    413: {"model": Problem, "description": "body larger than TASKBENCH_MAX_BODY_BYTES"},
    503: {"model": Problem, "description": "the broker failed (the id may be sent again), or did not answer "
                                           "within the enqueue timeout (the outcome is then unknown, and the "
                                           "id is answered 409 from then on)"},
}
HEALTH_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    503: {"model": Problem, "description": "Redis did not answer a PING in time"},
}


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its name (``"nan"``, ``"inf"``), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


async def validation_error(_: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, but renderable whatever the input: the default echoes ``NaN`` back and its
    JSON encoder (``allow_nan=False``) then fails with a 500."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422, content={"detail": finite(jsonable_encoder(exc.errors()))})
