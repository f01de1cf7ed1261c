"""One error shape for every refusal: `{"error": {"code", "message", "field"?}}`."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import DBAPIError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deckyard.artifacts import ArtifactStoreUnavailable
from deckyard.db import is_connection_lost, is_storage_full

log = logging.getLogger(__name__)

HTTP_CODES = {
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    500: "INTERNAL_ERROR",
    503: "DATABASE_UNAVAILABLE",
    507: "STORAGE_FULL",
}
ARTIFACT_STORE_UNAVAILABLE = "ARTIFACT_STORE_UNAVAILABLE"
"""503: the artefact store (S3) could not be reached; also with `Retry-After`."""
RETRY_AFTER_SECONDS = "1"


def first_line(exc: BaseException) -> str:
    """The first line of an error's text: a driver error's cause, without SQL or parameters."""
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


class StorageEpisode:
    """Whether writes are failing for lack of space; logs once when an episode starts.

    A full disk fails every write the same way; one error line per episode, not one traceback
    per request. Readiness ends the episode when space is back.
    """

    def __init__(self) -> None:
        self.full = False
        self.reason = ""

    def report(self, exc: BaseException) -> None:
        """A write failed for lack of space."""
        if not self.full:
            reason = first_line(exc)
            log.error("storage is full; writes answer 507 until space returns: %s", reason)
            self.full, self.reason = True, reason

    def clear(self) -> None:
        """Space is back."""
        if self.full:
            log.warning("storage has space again; writes resume")
        self.full, self.reason = False, ""


def infrastructure_answer(request: Request, exc: BaseException) -> JSONResponse | None:
    """507 for a full disk, 503 with Retry-After for a lost database connection or an artefact
    store that cannot be reached, else None."""
    if is_storage_full(exc):
        episode: StorageEpisode = request.app.state.storage_episode
        episode.report(exc)
        message = "the server's storage is full; nothing was stored, retry when space is freed"
        return JSONResponse(error_body(HTTP_CODES[507], message), status_code=507)
    if is_connection_lost(exc):
        where = f"{request.method} {request.url.path}"
        log.warning("%s: database connection lost, answered 503: %s", where, first_line(exc))
        message = "the database connection was lost; retry the request"
        return JSONResponse(
            error_body(HTTP_CODES[503], message),
            status_code=503,
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        )
    if isinstance(exc, ArtifactStoreUnavailable):
        where = f"{request.method} {request.url.path}"
        log.warning("%s: artefact store unavailable, answered 503: %s", where, first_line(exc))
        message = "the artefact store could not be reached; retry the request"
        return JSONResponse(
            error_body(ARTIFACT_STORE_UNAVAILABLE, message),
            status_code=503,
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        )
    return None


class ApiError(Exception):
    """An error answered with `status` and a machine-readable `code`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers
        self.extra = extra or {}


class ErrorDetail(BaseModel):
    """What went wrong: a stable `code`, a message for people, the `field` when one is to blame.

    Some codes add their own members (`problems`, `references`, `job_id`, ...).
    """

    model_config = ConfigDict(extra="allow")

    code: str
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    """Every refusal's body, whatever its status code (`/openapi.json` documents each)."""

    model_config = ConfigDict(extra="allow")

    error: ErrorDetail


def error_body(code: str, message: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON body of an error response."""
    body: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        body["field"] = field
    body.update(extra)
    return {"error": body}


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def _problem(error: Any, body: Any) -> dict[str, str]:
    """One validation error as `{"field", "message"}`; a JSON syntax error names line and column.

    FastAPI reports a body that is not JSON at `("body", <character offset>)`; the offset is
    no field, so the body is named and the offset becomes a line and a column.
    """
    if error.get("type") == "json_invalid" and isinstance(body, str):
        loc = tuple(error.get("loc", ()))
        pos = loc[-1] if loc and isinstance(loc[-1], int) else 0
        line = body.count("\n", 0, pos) + 1
        column = pos - body.rfind("\n", 0, pos)
        reason = error.get("ctx", {}).get("error", "invalid syntax")
        return {
            "field": "body",
            "message": f"not valid JSON: {reason} at line {line}, column {column}",
        }
    return {"field": _field(tuple(error.get("loc", ()))), "message": error["msg"]}


def unreadable_body(cause: BaseException | None) -> JSONResponse:
    """The 422 for a body FastAPI could not decode (not UTF-8, or nested beyond parsing)."""
    if isinstance(cause, UnicodeDecodeError):
        byte = cause.object[cause.start]
        reason = f"not UTF-8 (byte 0x{byte:02x} at offset {cause.start})"
    else:
        reason = "could not be parsed as JSON"
    problems = [{"field": "body", "message": reason}]
    body = error_body("INVALID_INPUT", f"body: {reason}", "body", problems=problems)
    return JSONResponse(body, status_code=422)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at the request's path (for a 405's `Allow` header).

    Each method is tried against the app's routes, so routers included in routers count too.
    HEAD is served wherever GET is (`HeadMiddleware`).
    """
    found = []
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        probe = {**request.scope, "method": method}
        if any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes):
            found.append(method)
    if "GET" in found:
        found.insert(1, "HEAD")
    return found


def payload_too_large(limit: int) -> JSONResponse:
    """The 413 answer for a body over `limit` bytes."""
    message = f"the request body is larger than {limit} bytes"
    return JSONResponse(error_body(HTTP_CODES[413], message), status_code=413)


class BodyLimitMiddleware:
    """Refuses request bodies over `max_body_size` bytes with a 413 in the error shape.

    A declared `Content-Length` over the limit is answered before the app runs; a streamed body
    raises `HTTPException(413)` from `receive` once it passes the limit, which the error handler
    answers. (Starlette's own limiter answers in plain text, so it is not used.)
    """

    def __init__(self, app: ASGIApp, max_body_size: int) -> None:
        self.app = app
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_size:
            await payload_too_large(self.max_body_size)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_size:
                raise StarletteHTTPException(413, f"larger than {self.max_body_size} bytes")
            return message

        await self.app(scope, limited, send)


class InfrastructureErrorMiddleware:
    """Answers a lost database or a full disk met by the middleware inside it, logging one line.

    Errors raised by a route reach the exception handlers. Those raised by middleware around
    the routes (`IdempotencyMiddleware` resolves the token, `AuditMiddleware` writes) reach
    Starlette's `ServerErrorMiddleware`, which answers through the catch-all handler and then
    re-raises, so the server logged a full traceback for every such 503. Here they are answered
    like the routes' ones; anything else, or an error after the answer started, goes on up.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            answer = None if started else infrastructure_answer(Request(scope), exc)
            if answer is None:
                raise
            await answer(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    """Answer API errors, validation errors, HTTP errors and crashes in the one error shape."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(
            error_body(exc.code, exc.message, exc.field, **exc.extra),
            status_code=exc.status,
            headers=exc.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [_problem(e, exc.body) for e in exc.errors()]
        first = problems[0] if problems else {"field": "body", "message": "invalid request"}
        field = first["field"]
        return JSONResponse(
            error_body("INVALID_INPUT", f"{field}: {first['message']}", field, problems=problems),
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.__cause__ is not None:
            # FastAPI's 400: a body it could not read before validation (the cause says why).
            return unreadable_body(exc.__cause__)
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return JSONResponse(
            error_body(HTTP_CODES.get(exc.status_code, f"HTTP_{exc.status_code}"), str(exc.detail)),
            status_code=exc.status_code,
            headers=headers,
        )

    app.state.storage_episode = StorageEpisode()

    @app.exception_handler(DBAPIError)
    @app.exception_handler(OSError)
    @app.exception_handler(ArtifactStoreUnavailable)
    async def infrastructure(request: Request, exc: Exception) -> JSONResponse:
        answer = infrastructure_answer(request, exc)
        if answer is None:
            raise exc
        return answer

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        # Starlette's ServerErrorMiddleware calls this, then re-raises so the server logs it;
        # errors raised outside the routes (in middleware) arrive here directly.
        answer = infrastructure_answer(request, exc)
        if answer is not None:
            return answer
        return JSONResponse(
            error_body(HTTP_CODES[500], "internal error; the server log has the details"),
            status_code=500,
        )
