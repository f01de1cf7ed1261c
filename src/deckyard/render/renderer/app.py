"""The renderer's HTTP control API (FastAPI); every route but `/healthz` must be signed.

Bodies are read and validated by hand rather than by FastAPI parameters, so that the signature is
checked before anything else (an unsigned malformed request gets 401, not 422) and every
validation problem becomes a 422 naming the field, never a 500.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from deckyard.render.protocol import (
    ARTIFACT_SHA256_HEADER,
    ARTIFACT_SIZE_HEADER,
    ATTEMPT_ID_HEADER,
    ArtifactInfo,
    AttemptRequest,
    AttemptStatus,
    DeckAttemptRequest,
    Receipt,
    RenderErrorCode,
    RenderInput,
    check_limits,
)
from deckyard.render.renderer.registry import AttemptConflictError, NoFreeSlotError
from deckyard.render.renderer.runtime import RendererRuntime


class ApiError(Exception):
    """An error answered as `{"error": code, "message": ..., "field": ...}`."""

    def __init__(
        self,
        status: int,
        code: RenderErrorCode,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.field, self.headers = field, headers


def _field_name(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "body"


async def signed(request: Request) -> bytes:
    """Dependency: the raw body, once the request's signature is verified (401 otherwise)."""
    runtime: RendererRuntime = request.app.state.runtime
    body = await request.body()
    target: bytes = request.scope.get("raw_path") or request.url.path.encode()
    query: bytes = request.scope.get("query_string") or b""
    if query:
        target = target + b"?" + query
    problem = runtime.verifier.verify(request.method, target, request.headers, body)
    if problem is not None:
        raise ApiError(401, RenderErrorCode.UNAUTHORIZED, problem.value)
    return body


Signed = Annotated[bytes, Depends(signed)]


def create_app(runtime: RendererRuntime) -> FastAPI:
    """Build the control API over a started `RendererRuntime`."""
    app = FastAPI(title="deckyard renderer", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.runtime = runtime
    registry = runtime.registry

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        body: dict[str, Any] = {"error": exc.code, "message": exc.message}
        if exc.field is not None:
            body["field"] = exc.field
        return JSONResponse(body, status_code=exc.status, headers=exc.headers)

    async def parse(body: bytes, model: type[RenderInput]) -> RenderInput:
        try:
            render = model.model_validate_json(body or b"{}")
        except ValidationError as exc:
            first = exc.errors()[0]
            field = _field_name(first["loc"])
            message = f"{field}: {first['msg']}"
            raise ApiError(422, RenderErrorCode.INVALID_INPUT, message, field) from None
        problems = check_limits(render, runtime.settings)
        if problems:
            first_problem = problems[0]
            message = f"{first_problem.field}: {first_problem.message}"
            raise ApiError(422, RenderErrorCode.INVALID_INPUT, message, first_problem.field)
        if render.url is not None:
            verdict = await runtime.guard.check_url(render.url)
            if not verdict.allowed:
                raise ApiError(422, verdict.code, f"url: {verdict.reason}", "url")
        return render

    async def parse_deck(body: bytes) -> DeckAttemptRequest:
        try:
            deck = DeckAttemptRequest.model_validate_json(body or b"{}")
        except ValidationError as exc:
            first = exc.errors()[0]
            field = _field_name(first["loc"])
            message = f"{field}: {first['msg']}"
            raise ApiError(422, RenderErrorCode.INVALID_INPUT, message, field) from None
        for page in deck.pages:
            problems = check_limits(page, runtime.settings)
            if problems:
                field = f"pages.{page.index}.{problems[0].field}"
                message = f"{field}: {problems[0].message}"
                raise ApiError(422, RenderErrorCode.INVALID_INPUT, message, field)
            if page.url is not None:
                verdict = await runtime.guard.check_url(page.url)
                if not verdict.allowed:
                    field = f"pages.{page.index}.url"
                    raise ApiError(422, verdict.code, f"{field}: {verdict.reason}", field)
        return deck

    def admit(attempt_id: str, render: RenderInput | DeckAttemptRequest) -> tuple[Receipt, bool]:
        try:
            if isinstance(render, DeckAttemptRequest):
                attempt, created = registry.submit_deck(render)
            else:
                attempt, created = registry.submit(attempt_id, render)
        except NoFreeSlotError:
            retry = runtime.settings.renderer_retry_after_seconds
            raise ApiError(
                429,
                RenderErrorCode.NO_FREE_SLOT,
                "every slot is busy",
                headers={"Retry-After": str(max(1, round(retry)))},
            ) from None
        except AttemptConflictError:
            raise ApiError(
                409,
                RenderErrorCode.ATTEMPT_CONFLICT,
                f"attempt {attempt_id} exists with a different input",
                "attempt_id",
            ) from None
        return registry.receipt(attempt.attempt_id), created

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "epoch": runtime.epoch}

    @app.get("/v1/capabilities")
    async def capabilities(_body: Signed) -> dict[str, Any]:
        return runtime.capabilities().model_dump(mode="json")

    @app.post("/v1/attempts")
    async def submit_attempt(body: Signed) -> JSONResponse:
        render = await parse(body, AttemptRequest)
        assert isinstance(render, AttemptRequest)
        receipt, created = admit(
            render.attempt_id, RenderInput(**render.model_dump(exclude={"attempt_id"}))
        )
        return JSONResponse(receipt.model_dump(mode="json"), status_code=202 if created else 200)

    @app.post("/v1/deck-attempts")
    async def submit_deck_attempt(body: Signed) -> JSONResponse:
        deck = await parse_deck(body)
        receipt, created = admit(deck.attempt_id, deck)
        return JSONResponse(receipt.model_dump(mode="json"), status_code=202 if created else 200)

    @app.get("/v1/attempts/{attempt_id}/pages/{index}/artifact")
    async def page_artifact(_body: Signed, attempt_id: str, index: int) -> Response:
        page = registry.page_artifact(attempt_id, index)
        visit = page.visit if page is not None else None
        if visit is None or visit.artifact is None or visit.artifact_path is None:
            raise ApiError(
                404, RenderErrorCode.RESULT_LOST, f"no artefact for {attempt_id} page {index}"
            )
        return _file_response(visit.artifact, visit.artifact_path, attempt_id)

    @app.get("/v1/attempts")
    async def batch_receipts(
        _body: Signed, ids: Annotated[str, Query(min_length=1)]
    ) -> dict[str, Any]:
        wanted = [part for part in ids.split(",") if part]
        if len(wanted) > runtime.settings.renderer_max_batch_ids:
            raise ApiError(
                422,
                RenderErrorCode.INVALID_INPUT,
                f"ids: at most {runtime.settings.renderer_max_batch_ids} per call",
                "ids",
            )
        return {"receipts": [registry.receipt(i).model_dump(mode="json") for i in wanted]}

    @app.get("/v1/changes")
    async def changes(
        _body: Signed,
        after: Annotated[int, Query(ge=-1)] = -1,
        wait: Annotated[float, Query(ge=0)] = 0.0,
    ) -> dict[str, Any]:
        limit = runtime.settings.renderer_changes_max_wait_seconds
        count = await registry.changes.wait_past(after, min(wait, limit))
        busy = runtime.settings.renderer_slots - registry.free_slots
        return {"changes": count, "busy": busy, "epoch": runtime.epoch}

    @app.get("/v1/attempts/{attempt_id}")
    async def one_receipt(_body: Signed, attempt_id: str) -> dict[str, Any]:
        return registry.receipt(attempt_id).model_dump(mode="json")

    @app.get("/v1/attempts/{attempt_id}/artifact")
    async def artifact(_body: Signed, attempt_id: str) -> Response:
        return _artifact_response(runtime, attempt_id)

    @app.delete("/v1/attempts/{attempt_id}")
    async def cancel(_body: Signed, attempt_id: str) -> dict[str, Any]:
        return (await registry.cancel(attempt_id)).model_dump(mode="json")

    @app.post("/v1/render")
    async def render_now(body: Signed) -> Response:
        render = await parse(body, RenderInput)
        attempt_id = f"sync-{uuid.uuid4().hex}"
        admit(attempt_id, render)
        receipt = await registry.wait(attempt_id)
        if receipt.status is AttemptStatus.SUCCEEDED:
            return _artifact_response(runtime, attempt_id)
        status = 504 if receipt.error_code == RenderErrorCode.DEADLINE_EXCEEDED else 502
        if receipt.error_kind == "content":
            status = 422
        return JSONResponse(
            {
                "error": receipt.error_code,
                "message": receipt.message,
                "receipt": receipt.model_dump(mode="json"),
            },
            status_code=status,
            headers={ATTEMPT_ID_HEADER: attempt_id},
        )

    return app


def _artifact_response(runtime: RendererRuntime, attempt_id: str) -> Response:
    attempt = runtime.registry.get(attempt_id)
    if attempt is None or (attempt.status.terminal and attempt.artifact is None):
        raise ApiError(404, RenderErrorCode.RESULT_LOST, f"no artefact for {attempt_id}")
    if attempt.artifact is None or attempt.artifact_path is None:
        raise ApiError(409, RenderErrorCode.RESULT_LOST, f"attempt {attempt_id} has not finished")
    return _file_response(attempt.artifact, attempt.artifact_path, attempt_id)


def _file_response(info: ArtifactInfo, path: Path, attempt_id: str) -> Response:
    try:
        data = path.read_bytes()
    except OSError:
        raise ApiError(
            404, RenderErrorCode.RESULT_LOST, f"artefact of {attempt_id} is gone"
        ) from None
    return Response(
        data,
        media_type=info.content_type,
        headers={
            ARTIFACT_SHA256_HEADER: info.sha256,
            ARTIFACT_SIZE_HEADER: str(info.size),
            ATTEMPT_ID_HEADER: attempt_id,
        },
    )
