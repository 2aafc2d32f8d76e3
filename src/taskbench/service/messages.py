"""What the API accepts and answers: strict, bounded request bodies and JSON errors that always render.

Strict means no coercion: ``"7"`` and ``true`` are not integers, ``false`` is not a time. Bounded
means every number has a range a benchmark can use: ``enqueued_at`` is a finite unix time between
2000 and 2100 (NaN, ±Infinity and ``1e309`` are refused), so one request cannot put ``inf`` in the
ledger or 1.8e9 s into the queue-wait histogram. A body is JSON text in UTF-8, nested no deeper than
:data:`MAX_DEPTH`, or a 400 (:class:`Utf8Route`), and every error renders whatever the client sent
(:func:`renderable`).
"""

from __future__ import annotations

import math
import uuid
from typing import Annotated, Any, Final, Literal

from fastapi import HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.utils import is_body_allowed_for_status_code
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from taskbench import inputs, payload
from taskbench.messages import TASK_ID_PATTERN

#: unix seconds: 2000-01-01 and 2100-01-01 UTC, the range ``enqueued_at`` must be in
EARLIEST: Final = 946_684_800.0
LATEST: Final = 4_102_444_800.0
#: a body's deepest nesting: a payload's own (the CLI's limit on ``--payload``) one level down
MAX_DEPTH: Final = payload.MAX_DEPTH + 1


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
    payload: dict[str, Any] | None = Field(
        default=None,
        description="the JSON object a user's task gets (route user/task, --workload module:callable); "
                    f"bounded by the body's size and nested at most {payload.MAX_DEPTH} levels",
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


def renderable(value: Any) -> Any:
    """``value`` as JSON can carry it, whatever a client sent, recursively: a non-finite float by its
    name (``"nan"``, ``"inf"``), bytes as text, and in every string (a key too) each lone surrogate
    escaped as the text ``\\udXXXX`` (a JSON ``"\\ud800"`` decodes to one, which UTF-8 cannot encode:
    the 422 that echoed it was a 500). Every other value is left as it is."""
    if isinstance(value, str):
        return value if value.isascii() else value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {renderable(k): renderable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [renderable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "backslashreplace")
    return value


class ErrorResponse(JSONResponse):
    """Starlette's JSONResponse, but one that renders any content: what JSON or UTF-8 cannot carry (a
    lone surrogate, NaN, bytes, an object) is made renderable first, never a 500 while answering."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except (ValueError, TypeError):  # UnicodeEncodeError is a ValueError, as is NaN's refusal
            return super().render(renderable(jsonable_encoder(renderable(content))))


async def validation_error(_: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, but renderable whatever the input: the default echoes the input back, and its
    encoding then fails with a 500 on ``NaN`` (``allow_nan=False``), on a lone surrogate (UTF-8) and
    on bytes that are not UTF-8 (a body that is not JSON)."""
    assert isinstance(exc, RequestValidationError)
    detail = renderable(jsonable_encoder(renderable(exc.errors())))
    return ErrorResponse(status_code=422, content={"detail": detail})


async def http_error(_: Request, exc: Exception) -> Response:
    """FastAPI's answer to an HTTPException (``{"detail"}``), rendered whatever the detail holds."""
    assert isinstance(exc, StarletteHTTPException)
    headers = getattr(exc, "headers", None)
    if not is_body_allowed_for_status_code(exc.status_code):
        return Response(status_code=exc.status_code, headers=headers)
    return ErrorResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)


#: the byte order marks of UTF-32 and UTF-16 (UTF-32 LE's begins with UTF-16 LE's: it comes first)
BOMS: Final = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"), (b"\xfe\xff", "UTF-16"),
               (b"\xff\xfe", "UTF-16"))


def not_utf8(body: bytes) -> str | None:
    """Why ``body`` is not JSON text in UTF-8 (RFC 8259, 8.1), or None when it may be.

    Python's ``json.loads`` of bytes, which FastAPI calls, guesses the encoding: it reads UTF-16 and
    UTF-32, with or without a byte order mark, and lets UTF-8's encoded surrogates through
    (``surrogatepass``). A NUL byte is never in JSON text outside a string, nor raw inside one; it is
    how UTF-16 and UTF-32 without a mark show, so it is refused as well. UTF-8's own mark passes (the
    RFC lets a parser ignore it)."""
    if b"\x00" not in body and (body.isascii() or _decodes(body)):
        return None
    for bom, name in BOMS:
        if body.startswith(bom):
            return f"the body is {name} (it begins with a byte order mark): JSON travels as UTF-8"
    if b"\x00" in body:
        return (f"the body holds a NUL byte at offset {body.index(0)}: not JSON text in UTF-8 (UTF-16 and "
                "UTF-32 put NULs between ASCII characters)")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the body is not UTF-8: byte {body[exc.start]:#04x} at offset {exc.start} ({exc.reason})"
    return None  # pragma: no cover (one of the above holds)


def _decodes(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class Utf8Route(APIRoute):
    """A route whose request body must be JSON text in UTF-8 (:func:`not_utf8`), else 400 with the
    reason. The body is read here first; FastAPI's own handler then parses the same bytes (the request
    keeps them): one coroutine frame and a scan of the body's bytes for every request."""

    def get_route_handler(self) -> Any:
        handler = super().get_route_handler()

        async def utf8_only(request: Request) -> Response:
            try:
                body = await request.body()
            except ClientDisconnect:  # as FastAPI's own reading of the body answers it (to nobody)
                raise HTTPException(400, "the client went away before its body was complete") from None
            problem = not_utf8(body)
            if problem is not None:
                raise HTTPException(400, problem)
            # the parser would recurse a level at a time and fail near 1,000 with a message naming no limit
            if inputs.too_deep(body, MAX_DEPTH):
                raise HTTPException(400, f"the body nests arrays and objects deeper than {MAX_DEPTH} levels")
            response: Response = await handler(request)
            return response

        return utf8_only
