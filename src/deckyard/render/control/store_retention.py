"""Retention statements on `render_requests` and `render_attempts` (noun-first names).

Only finished requests older than the retention are pruned; their attempts go with them. The
reads come first and return nothing on an idle system, so a retention pass that finds nothing
to do writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Text, cast, delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.jobs.status import TERMINAL
from deckyard.render.control.models import DOCUMENT_PREFIX
from deckyard.render.control.schema import render_attempts, render_pages, render_requests


async def render_requests_prunable(
    conn: AsyncConnection, cutoff: datetime, limit: int
) -> list[tuple[int, str | None, int | None]]:
    """Up to `limit` finished requests that finished before `cutoff`: (id, artefact key, the
    job that opened it). The caller keeps those whose job is still active: it has yet to
    check the request and take its result."""
    c = render_requests.c
    rows = await conn.execute(
        select(c.id, c.artifact_key, c.parent_job_id)
        .where(c.finished_at < cutoff, c.status.in_(TERMINAL))
        .order_by(c.finished_at, c.id)
        .limit(limit)
    )
    return [(int(r.id), r.artifact_key, r.parent_job_id) for r in rows]


async def render_requests_prune(conn: AsyncConnection, ids: Sequence[int]) -> int:
    """Delete the requests `ids` (still finished) with their attempts; how many requests."""
    c = render_requests.c
    ids = list(ids)
    await conn.execute(delete(render_attempts).where(render_attempts.c.request_id.in_(ids)))
    await conn.execute(delete(render_pages).where(render_pages.c.request_id.in_(ids)))
    result = await conn.execute(
        delete(render_requests).where(c.id.in_(ids), c.status.in_(TERMINAL))
    )
    return int(result.rowcount)


async def render_artifact_keys_referenced(conn: AsyncConnection, keys: Sequence[str]) -> set[str]:
    """Those of `keys` that a render request's result (or a deck request's page) points at."""
    c = render_requests.c
    rows = await conn.execute(select(c.artifact_key).where(c.artifact_key.in_(list(keys))))
    p = render_pages.c
    pages = await conn.execute(select(p.artifact_key).where(p.artifact_key.in_(list(keys))))
    return {str(r.artifact_key) for r in rows} | {str(r.artifact_key) for r in pages}


async def render_document_keys_referenced(conn: AsyncConnection, keys: Sequence[str]) -> set[str]:
    """Those of `keys` that are render documents (`requests.py`) a request's input still names.

    A text match (the key is 64 hex digits, so it cannot match by accident), one scan per
    document key; requests are pruned by retention, so the scans stay bounded. A document is
    stored before the row that names it commits: one swept in between is the sweep's grace
    period's to cover (`artifact_sweep_grace_seconds`).
    """
    digests = {
        key[len(DOCUMENT_PREFIX) : -len(".html")]: key
        for key in keys
        if key.startswith(DOCUMENT_PREFIX) and key.endswith(".html")
    }
    found: set[str] = set()
    text = cast(render_requests.c.input, Text)
    for digest, key in digests.items():
        if key in found:
            continue
        row = await conn.execute(
            select(render_requests.c.id).where(text.like(f"%{digest}%")).limit(1)
        )
        if row.first() is not None:
            found.add(key)
    return found


async def render_retention_counts(conn: AsyncConnection) -> dict[str, int]:
    """Row counts of the render request tables (for the soak and `/metrics`-style checks)."""
    out = {}
    for table in (render_requests, render_attempts):
        out[table.name] = int(
            (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        )
    return out
