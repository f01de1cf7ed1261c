"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness only: the process answers."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Readiness: the database is writable (more checks join as components land); 503 if not."""
    checks: dict[str, Any] = {}
    ready = True
    db = request.app.state.db
    try:
        await db.check_writable()
        checks["database"] = {"ok": True, "url": db.display_name}
    except Exception as exc:
        ready = False
        checks["database"] = {"ok": False, "error": str(exc).splitlines()[0][:300]}
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )
