"""Liveness and readiness."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import State

from deckyard.api.errors import first_line
from deckyard.api.state import loops_of
from deckyard.config import Settings
from deckyard.render.control.models import RendererState
from deckyard.render.control.service import RenderService

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness only: the process answers. Never touches the database."""
    return {"status": "ok"}


def details_allowed(request: Request) -> bool:
    """Whether this caller may see readiness details (paths, URLs, errors, loop figures).

    With `readyz_public_details` anyone may; otherwise only a bearer of `readyz_token`.
    """
    settings = request.app.state.settings
    if settings.readyz_public_details:
        return True
    token = settings.readyz_token
    given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    return token is not None and hmac.compare_digest(given.encode(), token.encode())


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Readiness: database writable, every loop alive (with its last tick), queue depths.

    503 when any check fails, except `renderers`, which is advisory (`renderers_check`). It
    reads but never writes. Without the readiness token each check shows only whether it is
    ok, so which component is not ready is public, and nothing else.
    """
    ready, checks = await readiness(request.app.state)
    if not details_allowed(request):
        checks = {name: {"ok": check["ok"]} for name, check in checks.items()}
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )


async def renderers_check(render: RenderService, settings: Settings) -> dict[str, Any]:
    """Whether any renderer, of this node or another, is up to take render requests.

    Advisory: it never makes the node unready. An API-only node (`--renderers 0`) of a cluster
    serves everything but rendering itself, and renders through the renderers the other nodes
    registered in the shared database; taking it out of service because none is up would stop
    the whole API, and render requests wait for a renderer until their deadline anyway. So the
    check says `ok: false` while none is up (and why), and the node stays ready.
    """
    configured = settings.renderers + len(settings.renderer_urls)
    try:
        renderers = await render.renderers()
    except Exception as exc:
        return {"ok": False, "configured": configured, "error": first_line(exc)}
    up = sum(1 for r in renderers if r["state"] == RendererState.UP)
    check: dict[str, Any] = {
        "ok": up > 0,
        "up": up,
        "configured": configured,
        "renderers": renderers,
    }
    if not up:
        check["error"] = (
            "no renderer is up; render requests wait for one"
            if renderers or configured
            else "no renderer is configured on this node nor registered by another"
        )
    return check


async def readiness(state: State) -> tuple[bool, dict[str, Any]]:
    """Whether the node is ready, and every check with its details."""
    checks: dict[str, Any] = {}
    ready = True
    min_free = state.settings.storage_min_free_bytes
    try:
        await state.db.check_writable(min_free)
        checks["database"] = {"ok": True, "url": state.db.display_name}
    except Exception as exc:
        ready = False
        checks["database"] = {"ok": False, "error": first_line(exc)}
    runtime = state.runtime
    loops = []
    for loop in loops_of(state):
        alive = loop.alive if state.settings.background_loops else None
        if alive is False:
            ready = False
        loops.append(
            {
                "name": loop.name,
                "alive": alive,
                "ticks": loop.stats.ticks,
                "errors": loop.stats.errors,
                "last_tick_at": loop.stats.last_tick_at.isoformat()
                if loop.stats.last_tick_at
                else None,
                "last_error": loop.stats.last_error,
            }
        )
    checks["loops"] = {
        "ok": all(lp["alive"] is not False for lp in loops),
        "background_loops": state.settings.background_loops,
        "loops": loops,
    }
    if checks["database"]["ok"]:
        try:
            checks["queues"] = {"ok": True, "depths": await runtime.depths()}
        except Exception as exc:
            ready = False
            checks["queues"] = {"ok": False, "error": first_line(exc)}
    render = getattr(state, "render", None)
    if render is not None:
        store = render.store
        free = store.free_bytes()
        store_ok = free is None or free >= min_free
        if not store_ok:
            ready = False
        checks["artifact_store"] = {
            "ok": store_ok,
            "url": store.url,
            "ephemeral": store.ephemeral,
            "free_bytes": free,
        }
        if checks["database"]["ok"]:
            checks["renderers"] = await renderers_check(render, state.settings)
    episode = getattr(state, "storage_episode", None)
    if episode is not None:
        storage_ok = checks["database"]["ok"] and checks.get("artifact_store", {}).get("ok", True)
        if storage_ok:
            episode.clear()
        elif episode.full:
            checks["database"].setdefault("storage_full", episode.reason)
    return ready, checks
