"""Render requests seen from outside a server process: their API states, their event streams,
and what the database says of them once the server is gone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import httpx
from sqlalchemy import func, select

from deckyard.db import Database
from deckyard.jobs.schema import jobs
from deckyard.render.control.schema import render_attempts, render_requests

TERMINAL = ("succeeded", "failed", "cancelled")


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event, data) of each event of a finished SSE body (`/v1/renders/{id}/events`)."""
    found = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            found.append((fields["event"], json.loads(fields["data"])))
    return found


def render_statuses(
    client: httpx.Client, headers: dict[str, str], ids: Iterable[int], url: str = ""
) -> dict[int, str]:
    """Each render's status, as `GET /v1/renders/{id}` shows it."""
    return {i: client.get(f"{url}/v1/renders/{i}", headers=headers).json()["status"] for i in ids}


def query(db_url: str, statement: Any) -> list[Any]:
    """The rows of one read `statement` on the database at `db_url`."""

    async def run() -> list[Any]:
        db = Database(db_url)
        try:
            async with db.read_connection() as conn:
                return list(await conn.execute(statement))
        finally:
            await db.dispose()

    return asyncio.run(run())


def assert_rendered_once_each(db_url: str, ids: list[int]) -> list[Any]:
    """Every render of `ids` succeeded with an artefact and exactly one succeeded attempt (no
    render committed twice), none of them opened by a job, and no job runs screenshots; the
    renders' attempts, for the caller's own checks."""
    r, a = render_requests.c, render_attempts.c
    requests = query(
        db_url, select(r.id, r.status, r.parent_job_id, r.artifact_key).where(r.id.in_(ids))
    )
    assert sorted(x.id for x in requests) == sorted(ids)
    assert {(x.status, x.parent_job_id) for x in requests} == {("succeeded", None)}, requests
    assert all(x.artifact_key for x in requests), requests
    attempts = query(
        db_url,
        select(a.request_id, a.status, a.error_code, a.renderer_epoch).where(a.request_id.in_(ids)),
    )
    succeeded = sorted(x.request_id for x in attempts if x.status == "succeeded")
    assert succeeded == sorted(ids), attempts  # one success each, no duplicate
    shot_jobs = query(
        db_url, select(func.count()).select_from(jobs).where(jobs.c.kind == "screenshot")
    )
    assert shot_jobs[0][0] == 0
    return attempts
