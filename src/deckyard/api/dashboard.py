"""The web dashboard: token sign-in, overview, jobs and tasks, rendered from templates.

Pages read through the same runtime, executor and readiness code as the API, scoped to the
signed-in workspace. The session is the token itself in an HttpOnly, SameSite=Strict cookie,
which `current_principal` also accepts so the browser's EventSource and fetch calls reach the API;
state-changing calls from the page send the session's CSRF token, which every page carries in
`<meta name="deckyard-csrf">` (see `deckyard.api.auth.cookie_write_refusal`).
"""

from __future__ import annotations

import asyncio
import posixpath
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, get_args
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent

from deckyard.api.auth import (
    SESSION_COOKIE,
    Principal,
    TokenRole,
    csrf_token,
    current_principal,
    same_origin,
    session_token,
    token_resolve,
)
from deckyard.api.dashboard_format import templates
from deckyard.api.errors import ApiError
from deckyard.api.health import readiness
from deckyard.api.jobs import JobOut, StatusName, owned_job, runtime_of
from deckyard.api.params import AfterId, BeforeId, RowId, bounded_id
from deckyard.api.renders import RenderOut, owned_render, render_service
from deckyard.api.tasks import TaskEventOut, executor_of, owned_task, task_out
from deckyard.db.notify import ANY_CHANNEL, Subscription
from deckyard.jobs import WAKE_EVENTS, Job

HERE = Path(__file__).parent
STATIC = {"app.css": "text/css", "app.js": "text/javascript"}
PAGE_SIZE = 25
# The roles whose tokens may cancel and retry (a viewer only reads; a worker has no dashboard).
WRITERS = frozenset({TokenRole.ADMIN, TokenRole.EDITOR})
# A row stream ends after this long and the page reconnects, so an open tab never holds a
# server's graceful shutdown for more than this.
STREAM_SECONDS = 25.0

router = APIRouter(include_in_schema=False)
Caller = Annotated[Principal, Depends(current_principal)]


async def signed_in(request: Request) -> Principal | None:
    """The principal of the request's session cookie or bearer token, or None."""
    try:
        return await current_principal(request)
    except ApiError:
        return None


def to_sign_in(request: Request) -> RedirectResponse:
    """A redirect to the sign-in page that comes back here afterwards."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/ui/sign-in?" + urlencode({"next": here}), status_code=303)


def page(request: Request, name: str, principal: Principal | None, **ctx: Any) -> HTMLResponse:
    """Render a template with the signed-in workspace, and whether it may write, in its context.

    `can_write` hides the actions (cancel, retry) that the API would refuse the token's role.
    """
    status = ctx.pop("status_code", 200)
    ctx["workspace"] = principal.workspace_id if principal else None
    ctx["can_write"] = principal is not None and principal.role in WRITERS
    session = session_token(request)
    ctx["csrf"] = csrf_token(session) if session else ""
    return templates.TemplateResponse(request, name, ctx, status_code=status)


def not_found(request: Request, principal: Principal, message: str) -> HTMLResponse:
    """A 404 page."""
    return page(
        request,
        "message.html",
        principal,
        title="Not found",
        message=message,
        back="/",
        status_code=404,
    )


def safe_next(value: str) -> str:
    """A dashboard page to go to after sign-in (`/` or below `/ui/`); anything else: `/`.

    Never an API or site path: a sign-in link must not open user content (an asset, a hosted
    site) with the fresh session.
    """
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or "\\" in value or not value.isprintable():
        return "/"
    path = posixpath.normpath(parts.path or "/")
    if path != "/" and not path.startswith("/ui/"):
        return "/"
    return path + (f"?{parts.query}" if parts.query else "")


@router.get("/ui/static/{name}")
async def static(name: str) -> FileResponse:
    """The dashboard's stylesheet and script."""
    if name not in STATIC:
        raise ApiError(404, "NOT_FOUND", f"no static file {name}")
    return FileResponse(
        HERE / "static" / name, media_type=STATIC[name], headers={"cache-control": "no-cache"}
    )


@router.get("/ui/sign-in")
async def sign_in_form(request: Request, next: str = "/") -> Response:
    """The sign-in form."""
    return page(request, "sign_in.html", None, next=safe_next(next), error=None)


@router.post("/ui/session")
async def sign_in(request: Request) -> Response:
    """Check a token from the form and keep it in an HttpOnly, SameSite=Strict cookie."""
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    target = safe_next((form.get("next") or ["/"])[0])
    if not same_origin(request):
        raise ApiError(403, "CROSS_SITE", "sign-in must come from the dashboard's own page")
    principal = await token_resolve(request.app.state.db, token) if token else None
    if principal is None:
        error = "That token is unknown or revoked." if token else "Paste a token to sign in."
        return page(request, "sign_in.html", None, next=target, error=error, status_code=401)
    resp = RedirectResponse(target, status_code=303)
    resp.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return resp


@router.post("/ui/sign-out")
async def sign_out(request: Request) -> Response:
    """Forget the session cookie."""
    if not same_origin(request):
        raise ApiError(403, "CROSS_SITE", "sign-out must come from the dashboard's own page")
    resp = RedirectResponse("/ui/sign-in", status_code=303)
    resp.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return resp


@router.get("/")
async def overview(request: Request) -> Response:
    """Queue depths, loop health and the database check from readiness; renderers load in JS."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    is_ready, checks = await readiness(request.app.state)
    ready = {"status": "ready" if is_ready else "not ready", "checks": checks}
    depths: dict[str, dict[str, int]] = checks.get("queues", {}).get("depths", {})
    totals = {s: sum(d.get(s, 0) for d in depths.values()) for s in ("pending", "running")}
    peak = max((sum(d.values()) for d in depths.values()), default=1) or 1
    return page(
        request, "overview.html", principal, ready=ready, depths=depths, totals=totals, peak=peak
    )


@router.get("/ui/jobs")
async def jobs_page(
    request: Request,
    status: Annotated[StatusName | None, Query()] = None,
    queue: Annotated[str | None, Query(max_length=64)] = None,
    kind: Annotated[str | None, Query(max_length=128)] = None,
    before: BeforeId = None,
) -> Response:
    """Jobs of the workspace with filters and paging; rows update live."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    filters = {k: v for k, v in (("status", status), ("queue", queue), ("kind", kind)) if v}
    jobs = await runtime_of(request).list(
        workspace_id=principal.workspace_id, before_id=before, limit=PAGE_SIZE, **filters
    )
    older = urlencode({**filters, "before": jobs[-1].id}) if len(jobs) == PAGE_SIZE else None
    return page(
        request,
        "jobs.html",
        principal,
        jobs=[JobOut.of(j) for j in jobs],
        filters=filters,
        first_page=before is None,
        older=older,
        newer=urlencode(filters) if before is not None else None,
        statuses=get_args(StatusName),
    )


def row_event(request: Request, job: Job) -> ServerSentEvent:
    """A job's table row as an SSE event."""
    html = templates.get_template("_job_row.html").render(job=JobOut.of(job), request=request)
    return ServerSentEvent(event="row", data={"id": job.id, "status": job.status, "html": html})


async def woken(subs: list[Subscription], timeout: float) -> None:
    """Wait until any of `subs` is woken, or `timeout` seconds."""
    waits = [asyncio.ensure_future(sub.wait(timeout)) for sub in subs]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


@router.get("/ui/jobs/stream", response_class=EventSourceResponse)
async def job_rows(
    request: Request,
    principal: Caller,
    watch: Annotated[str, Query(max_length=2000, pattern=r"^[0-9,]*$")] = "",
    newest: AfterId = None,
    status: Annotated[StatusName | None, Query()] = None,
    queue: Annotated[str | None, Query(max_length=64)] = None,
    kind: Annotated[str | None, Query(max_length=128)] = None,
) -> AsyncIterator[ServerSentEvent]:
    """Rows of the watched jobs as they change and, with `newest`, of new matching jobs.

    Woken by job events and enqueues, like the API's event stream; ends with a `bye` event after
    STREAM_SECONDS so the page reconnects with what it then shows.
    """
    rt = runtime_of(request)
    ids = {i for i in map(bounded_id, watch.split(",")) if i is not None}
    seen: dict[int, tuple[Any, ...]] = {}
    filters = {k: v for k, v in (("status", status), ("queue", queue), ("kind", kind)) if v}
    subs = [rt.db.bus.subscribe(WAKE_EVENTS), rt.db.bus.subscribe(ANY_CHANNEL)]
    ends = time.monotonic() + STREAM_SECONDS
    try:
        while True:
            if newest is not None:
                fresh = await rt.list(
                    workspace_id=principal.workspace_id, limit=PAGE_SIZE, **filters
                )
                for new in reversed([j for j in fresh if j.id > newest]):
                    newest = new.id
                    ids.add(new.id)
            for job_id in sorted(ids):
                job: Job | None = await rt.get(job_id)
                if job is None or job.workspace_id != principal.workspace_id:
                    ids.discard(job_id)
                    continue
                sig = (job.status, job.attempt, job.cancel_requested_at, job.finished_at)
                if seen.get(job_id) != sig:
                    seen[job_id] = sig
                    yield row_event(request, job)
                if job.is_terminal:
                    ids.discard(job_id)
            left = ends - time.monotonic()
            if left <= 0 or (not ids and newest is None):
                yield ServerSentEvent(event="bye", data={"newest": newest})
                return
            await woken(subs, min(left, rt.settings.job_idle_poll_ceiling_seconds))
    finally:
        for sub in subs:
            sub.close()


@router.get("/ui/jobs/{job_id:int}")
async def job_page(request: Request, job_id: RowId) -> Response:
    """One job: its fields, artefact, actions and event timeline."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    try:
        job = await owned_job(request, principal, job_id)
    except ApiError:
        return not_found(request, principal, f"There is no job #{job_id} in this workspace.")
    events = [e async for e in runtime_of(request).events(job.id, follow=False)]
    result = job.result if isinstance(job.result, dict) else {}
    artifact = result if isinstance(result.get("content_type"), str) else None
    return page(
        request, "job.html", principal, job=JobOut.of(job), events=events, artifact=artifact
    )


@router.get("/ui/renders")
async def renders_page(request: Request, before: BeforeId = None) -> Response:
    """Render requests of the workspace (screenshots, validations, deck renders), newest
    first; the page refreshes itself while one is active."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    found = await render_service(request).of_workspace(
        principal.workspace_id, before_id=before, limit=PAGE_SIZE
    )
    older = urlencode({"before": found[-1].id}) if len(found) == PAGE_SIZE else None
    renders = [RenderOut.of(r) for r in found]
    return page(
        request,
        "renders.html",
        principal,
        renders=renders,
        active=any(not r.is_terminal for r in found),
        older=older,
        newer="" if before is not None else None,
    )


@router.get("/ui/renders/{render_id:int}")
async def render_page(request: Request, render_id: RowId) -> Response:
    """One render request: its state, attempts, error, artefact and actions."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    try:
        render = await owned_render(request, principal, render_id)
    except ApiError:
        return not_found(request, principal, f"There is no render #{render_id} in this workspace.")
    return page(request, "render.html", principal, render=RenderOut.of(render))


@router.get("/ui/tasks")
async def tasks_page(request: Request) -> Response:
    """Tasks of the workspace, newest first."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    ex = executor_of(request)
    rows = await ex.of_workspace(principal.workspace_id, limit=PAGE_SIZE * 2)
    found = [task_out(ex, row) for row in rows]
    return page(request, "tasks.html", principal, tasks=found)


@router.get("/ui/tasks/{task_id:int}")
async def task_page(request: Request, task_id: RowId) -> Response:
    """One task: its stages with the current one marked, and its execution events."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    ex = executor_of(request)
    try:
        task = task_out(ex, await owned_task(request, principal, task_id))
    except ApiError:
        return not_found(request, principal, f"There is no task #{task_id} in this workspace.")
    events = [
        TaskEventOut(**{k: e[k] for k in TaskEventOut.model_fields})
        for e in await ex.events(task_id)
    ]
    return page(request, "task.html", principal, task=task, events=events)
