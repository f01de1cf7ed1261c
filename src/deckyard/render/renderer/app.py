"""The renderer's HTTP control API (FastAPI); every route but `/healthz` must be signed.

Bodies are read and validated by hand rather than by FastAPI parameters, so that the signature is
checked before anything else (an unsigned malformed request gets 401, not 422) and every
validation problem becomes a 422 naming the field, never a 500.

`RendererRuntime` is what those routes drive, one per renderer process: pool, attempt registry,
signature check, SSRF guard and the background loops. Its `start()` makes the process a child
subreaper, launches the browser pool, opens the first document tabs, and starts the artefact
sweeper and the reaper (woken by SIGCHLD, with a periodic pass because signals coalesce); `stop()`
fails what is still running, closes every browser and reaps what is left. Its `drain`
(`drain.py`) refuses new attempts and ends the process once the in-flight ones are done.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, ValidationError

from deckyard import tracing
from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.render.processes import (
    EPOCH_ENV,
    become_subreaper,
    children_of,
    kill_groups,
    kill_pids,
    reap_adopted,
    tagged_pids,
)
from deckyard.render.protocol import (
    ARTIFACT_SHA256_HEADER,
    ARTIFACT_SIZE_HEADER,
    ATTEMPT_ID_HEADER,
    IMAGE_FORMATS,
    ArtifactInfo,
    AttemptStatus,
    Capabilities,
    ChangesAnswer,
    DeckAttemptRequest,
    DeckPage,
    Receipt,
    RenderErrorCode,
    RenderInput,
    SignatureVerifier,
    check_limits,
)
from deckyard.render.renderer.browser.pool import BrowserPool
from deckyard.render.renderer.browser.tabs import TabPool
from deckyard.render.renderer.drain import Drain
from deckyard.render.renderer.registry import (
    AttemptConflictError,
    AttemptRegistry,
    DocumentCache,
    NoFreeSlotError,
    PageState,
)
from deckyard.render.renderer.ssrf import UrlGuard

log = logging.getLogger(__name__)

R = TypeVar("R", bound=RenderInput)


class RendererRuntime:
    """Everything the control API drives; one per renderer process."""

    def __init__(
        self,
        settings: Settings,
        *,
        epoch: str,
        renderer_id: str,
        root: Path,
        clock: Clock = SYSTEM_CLOCK,
        on_process_group: Callable[[int], None] = lambda _pgid: None,
    ) -> None:
        if not settings.renderer_secret:
            raise ValueError("a renderer needs DECKYARD_RENDERER_SECRET")
        self.settings = settings
        self.epoch = epoch
        self.renderer_id = renderer_id
        self.root = root
        self.verifier = SignatureVerifier(
            settings.renderer_secret, settings.renderer_signature_skew_seconds, clock
        )
        self.guard = UrlGuard(
            settings.renderer_url_allow_hosts, settings.renderer_dns_timeout_seconds
        )
        self.pool = BrowserPool(settings, epoch, on_process_group)
        self.tabs = TabPool(settings, self.pool)
        self.documents = DocumentCache(settings.renderer_document_cache_bytes)
        self.registry = AttemptRegistry(
            settings, self.pool, self.tabs, self.guard, root, clock, renderer_id, epoch
        )
        self.drain = Drain(self.registry, settings, clock)
        self._protected: set[int] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._stopping: asyncio.Task[None] | None = None
        self._subreaper = False

    async def start(self) -> None:
        """Become a subreaper, launch Chromium and start the sweeper and reaper loops."""
        self._subreaper = become_subreaper()
        if not self._subreaper:
            log.warning("PR_SET_CHILD_SUBREAPER unavailable; orphans go to PID 1")
        self.registry.start()
        self._protected = set(children_of(os.getpid()))
        await self.pool.start()
        self._protected |= self.pool.driver_pids
        self.tabs.start()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGCHLD, self.reap)
        self._loops = [
            asyncio.create_task(
                self._every(self.settings.renderer_sweep_interval_seconds, self.registry.sweep)
            ),
            asyncio.create_task(
                self._every(self.settings.renderer_reap_interval_seconds, self.reap)
            ),
        ]

    def reap(self) -> None:
        """Reap exited processes adopted as subreaper (not the driver or the watchdog)."""
        reap_adopted(self._protected)

    async def _every(self, seconds: float, action: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                action()
            except Exception:
                log.exception("background pass %r failed", action)

    def capabilities(self) -> Capabilities:
        """What `GET /v1/capabilities` answers."""
        settings = self.settings
        return Capabilities(
            renderer_id=self.renderer_id,
            epoch=self.epoch,
            slots=settings.renderer_slots,
            free_slots=0 if self.drain.draining else self.registry.free_slots,
            browser_version=self.pool.version,
            browser_generation=self.pool.generation,
            formats=list(IMAGE_FORMATS),
            max_dimension=settings.renderer_max_dimension,
            max_pixels=settings.renderer_max_pixels,
            max_scale=settings.renderer_max_scale,
            max_timeout_seconds=settings.renderer_max_timeout_seconds,
        )

    def begin_stop(self) -> None:
        """Start `stop` in the background (when the stop signal comes); `stop` then waits for
        that one instead of stopping twice."""
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self._stop())

    async def stop(self) -> None:
        """Stop the loops, fail active attempts, kill the browsers, drop the tabs and reap the
        leftovers (once, however often it is asked)."""
        self.begin_stop()
        assert self._stopping is not None
        await self._stopping

    @property
    def stopping(self) -> bool:
        """Whether the stop has begun."""
        return self._stopping is not None

    async def _stop(self) -> None:
        await self.drain.stop()
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.registry.stop()
        await self.pool.kill_browsers()
        await self.tabs.stop()
        await self.pool.stop()
        with contextlib.suppress(RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGCHLD)
        await self._sweep_leftovers()

    async def _sweep_leftovers(self) -> None:
        """Kill and reap tagged helpers (crash handlers and the like) that outlived Chromium.

        Without this they would be re-parented to PID 1 when the renderer exits, and a PID 1
        that does not reap (a bare container entrypoint) keeps them as zombies.
        """
        deadline = asyncio.get_running_loop().time() + self.settings.renderer_watchdog_grace_seconds
        while asyncio.get_running_loop().time() < deadline:
            leftovers = tagged_pids(EPOCH_ENV, self.epoch, exclude=self._protected)
            kill_pids(leftovers)
            kill_groups(self.pool.process_groups)
            self.reap()
            adopted = [p for p in children_of(os.getpid()) if p not in self._protected]
            if not leftovers and not adopted:
                return
            await asyncio.sleep(self.settings.renderer_cleanup_timeout_seconds / 10)


class ApiError(Exception):
    """An error answered as `{"error": code, "message": ..., "field": ...}`."""

    def __init__(
        self,
        status: int,
        code: RenderErrorCode,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        missing: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.field, self.headers, self.missing = field, headers, missing


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


class DrainBody(BaseModel):
    """`POST /v1/drain`: begin draining; `release` once the caller holds nothing here."""

    model_config = ConfigDict(extra="forbid")

    release: bool = False


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
        if exc.missing is not None:
            body["missing"] = exc.missing
        return JSONResponse(body, status_code=exc.status, headers=exc.headers)

    def by_value(render: R) -> R:
        """`render` with its document by value: one sent now is kept, a known key resolved.

        An unknown key comes back unchanged (the caller refuses it).
        """
        if render.document is not None:
            runtime.documents.keep(render.document)
        elif render.document_key is not None:
            document = runtime.documents.get(render.document_key)
            if document is not None:
                return render.model_copy(update={"document": document, "document_key": None})
        return render

    def unknown(keys: list[str], field: str) -> ApiError:
        message = f"{field}: {len(keys)} document(s) not held here; send them by value"
        return ApiError(422, RenderErrorCode.DOCUMENT_UNKNOWN, message, field, missing=keys)

    async def parse(body: bytes) -> RenderInput:
        try:
            render = RenderInput.model_validate_json(body or b"{}")
        except ValidationError as exc:
            first = exc.errors()[0]
            field = _field_name(first["loc"])
            message = f"{field}: {first['msg']}"
            raise ApiError(422, RenderErrorCode.INVALID_INPUT, message, field) from None
        render = by_value(render)
        if render.document_key is not None:
            raise unknown([render.document_key], "document_key")
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
        pages = [by_value(page) for page in deck.pages]
        missing = [p for p in pages if p.document_key is not None]
        if missing:
            field = f"pages.{missing[0].index}.document_key"
            raise unknown(sorted({str(p.document_key) for p in missing}), field)
        deck = deck.model_copy(update={"pages": pages})
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

    def admit(deck: DeckAttemptRequest) -> tuple[Receipt, bool]:
        try:
            attempt, created = registry.submit_deck(deck)
        except NoFreeSlotError:
            retry = runtime.settings.renderer_retry_after_seconds
            draining = runtime.drain.draining
            raise ApiError(
                429,
                RenderErrorCode.NO_FREE_SLOT,
                "draining: no new attempts" if draining else "every slot is busy",
                headers={"Retry-After": str(max(1, round(retry)))},
            ) from None
        except AttemptConflictError:
            raise ApiError(
                409,
                RenderErrorCode.ATTEMPT_CONFLICT,
                f"attempt {deck.attempt_id} exists with a different input",
                "attempt_id",
            ) from None
        return registry.receipt(attempt.attempt_id), created

    def traced_admit(request: Request, deck: DeckAttemptRequest) -> tuple[Receipt, bool]:
        """`admit` in a `renderer.capture` span continuing the caller's `traceparent`; the
        attempt's task starts inside it, and the span ends when that task does."""
        attempt_id = deck.attempt_id
        ids = (request.headers, attempt_id, runtime.renderer_id, runtime.epoch)
        with tracing.capture_span(*ids) as capture:
            receipt, created = admit(deck)
            attempt = registry.get(attempt_id) if created else None
            task = attempt.task if attempt is not None else None
            capture.follow(task, lambda: registry.receipt(attempt_id).model_dump())
        return receipt, created

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        tabs = {"resets": runtime.tabs.resets, "kept": runtime.tabs.kept}
        draining = runtime.drain.draining
        return {"status": "ok", "epoch": runtime.epoch, "tabs": tabs, "draining": draining}

    @app.get("/v1/capabilities")
    async def capabilities(_body: Signed) -> dict[str, Any]:
        return {
            **runtime.capabilities().model_dump(mode="json"),
            "draining": runtime.drain.draining,
        }

    @app.post("/v1/drain")
    async def drain(body: Signed) -> dict[str, Any]:
        try:
            ask = DrainBody.model_validate_json(body or b"{}")
        except ValidationError as exc:
            field = _field_name(exc.errors()[0]["loc"])
            message = f"{field}: {exc.errors()[0]['msg']}"
            raise ApiError(422, RenderErrorCode.INVALID_INPUT, message, field) from None
        if not runtime.stopping:
            runtime.drain.begin()
        if ask.release:
            runtime.drain.release()
        return runtime.drain.status()

    @app.post("/v1/deck-attempts")
    async def submit_deck_attempt(body: Signed, request: Request) -> JSONResponse:
        deck = await parse_deck(body)
        count = registry.changes.count
        receipt, created = traced_admit(request, deck)
        receipt.changes = count if created else None
        return JSONResponse(receipt.model_dump(mode="json"), status_code=202 if created else 200)

    @app.get("/v1/attempts/{attempt_id}/pages/{index}/artifact")
    async def page_artifact(_body: Signed, attempt_id: str, index: int) -> Response:
        return _page_response(runtime, attempt_id, index)

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
        receipts: bool = False,
    ) -> Response:
        limit = runtime.settings.renderer_changes_max_wait_seconds
        count = await registry.changes.wait_past(after, min(wait, limit))
        busy = runtime.settings.renderer_slots - registry.free_slots
        answer = ChangesAnswer(changes=count, busy=busy, epoch=runtime.epoch)
        if receipts:
            _add_endings(runtime, answer, after)
        # Serialised by pydantic in one go: the answer may carry megabytes of base64.
        body = answer.model_dump_json(exclude_defaults=not receipts)
        return Response(body, media_type="application/json")

    @app.get("/v1/attempts/{attempt_id}")
    async def one_receipt(_body: Signed, attempt_id: str) -> dict[str, Any]:
        return registry.receipt(attempt_id).model_dump(mode="json")

    @app.delete("/v1/attempts/{attempt_id}")
    async def cancel(_body: Signed, attempt_id: str) -> dict[str, Any]:
        return (await registry.cancel(attempt_id)).model_dump(mode="json")

    @app.post("/v1/render")
    async def render_now(body: Signed, request: Request) -> Response:
        render = await parse(body)
        attempt_id = f"sync-{uuid.uuid4().hex}"
        page = DeckPage.model_validate({**render.model_dump(), "index": 0})
        traced_admit(request, DeckAttemptRequest(attempt_id=attempt_id, pages=[page]))
        receipt = await registry.wait(attempt_id)
        return _sync_answer(runtime, receipt)

    return app


def _sync_answer(runtime: RendererRuntime, receipt: Receipt) -> Response:
    """What `POST /v1/render` answers once its one-page attempt ended: page 0's artefact, or
    the error that page (or, when it never finished, the attempt) ended with."""
    attempt_id = receipt.attempt_id
    page = next(iter(receipt.pages or []), None)
    if page is not None and page.status is AttemptStatus.SUCCEEDED:
        return _page_response(runtime, attempt_id, page.index)
    failed = page if page is not None else receipt
    status = 504 if failed.error_code == RenderErrorCode.DEADLINE_EXCEEDED else 502
    if failed.error_kind == "content":
        status = 422
    return JSONResponse(
        {
            "error": failed.error_code,
            "message": failed.message,
            "receipt": receipt.model_dump(mode="json"),
        },
        status_code=status,
        headers={ATTEMPT_ID_HEADER: attempt_id},
    )


def _add_endings(runtime: RendererRuntime, answer: ChangesAnswer, after: int) -> None:
    """Put the receipts of attempts that ended or finished a page past `after` into a change
    answer, with the artefacts of their succeeded pages inline while they fit its budget."""
    registry = runtime.registry
    ids, answer.complete = registry.changes.ended_since(after)
    budget = runtime.settings.renderer_changes_inline_max_bytes
    for attempt_id in ids:
        answer.receipts.append(registry.receipt(attempt_id))
        attempt = registry.get(attempt_id)
        for page in attempt.pages.values() if attempt is not None else ():
            budget -= _inline(runtime, answer, attempt_id, page, budget)


def _inline(
    runtime: RendererRuntime, answer: ChangesAnswer, attempt_id: str, page: PageState, budget: int
) -> int:
    """Put one succeeded page's artefact into `answer.artifacts` (key `attempt_id/index`) if
    it was not sent inline before and fits `budget`; the bytes it took (0 if none).

    A page goes inline once: the control plane commits it from the first answer that carries
    it, and a later answer (a long-poll from an older count) would only repeat megabytes.
    """
    stored = page.artifact
    if page.status is not AttemptStatus.SUCCEEDED or page.sent_inline or stored is None:
        return 0
    info, path = stored
    if info.size > budget:
        return 0
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    page.sent_inline = True
    answer.artifacts[f"{attempt_id}/{page.index}"] = base64.b64encode(data).decode("ascii")
    runtime.registry.artifact_served(attempt_id, page.index)
    return len(data)


def _page_response(runtime: RendererRuntime, attempt_id: str, index: int) -> Response:
    """A finished page's artefact, noted as served; 404 `RENDER_RESULT_LOST` without one."""
    page = runtime.registry.page_artifact(attempt_id, index)
    stored = page.artifact if page is not None else None
    if stored is None:
        raise ApiError(
            404, RenderErrorCode.RESULT_LOST, f"no artefact for {attempt_id} page {index}"
        )
    answer = _file_response(*stored, attempt_id)
    runtime.registry.artifact_served(attempt_id, index)
    return answer


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
