"""Storage routes (admin tokens): what storage holds, and a sweep on demand.

`GET /v1/storage` reports the row counts of the tables retention prunes, the artefact store's
object count and size, and the asset blobs; `POST /v1/storage/sweep` runs retention's prune and
the artefact sweep now, to the end, instead of waiting for their loops. Both are about the whole
node (every workspace's rows), which is why they need an admin token.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from deckyard.api.auth import Principal, admin_principal
from deckyard.decks.retention import Footprint, Retention

router = APIRouter(prefix="/v1/storage", tags=["storage"])
Admin = Annotated[Principal, Depends(admin_principal)]


class RetentionOut(BaseModel):
    """The retention settings in force, seconds."""

    jobs: float
    render_requests: float
    tasks: float
    sweep_grace: float


class StorageOut(BaseModel):
    """Rows of the pruned tables, the artefact store and the asset blobs, now."""

    rows: dict[str, int] = Field(description="Row count per table (jobs, render_requests, ...).")
    store_objects: int
    store_bytes: int
    asset_blobs: int = Field(description="Distinct asset contents stored (once each).")
    asset_blob_bytes: int
    retention: RetentionOut


class SweepOut(BaseModel):
    """What a sweep on demand removed, and storage afterwards."""

    render_requests_pruned: int
    tasks_pruned: int
    objects_deleted: int
    blobs_deleted: int
    storage: StorageOut


def retention_of(request: Request) -> Retention:
    """The node's retention component."""
    r: Retention = request.app.state.node.retention
    return r


def storage_out(request: Request, f: Footprint) -> StorageOut:
    """The API view of a footprint."""
    s = request.app.state.settings
    return StorageOut(
        rows=f.rows,
        store_objects=f.store_objects,
        store_bytes=f.store_bytes,
        asset_blobs=f.asset_blobs,
        asset_blob_bytes=f.asset_blob_bytes,
        retention=RetentionOut(
            jobs=s.job_retention_seconds,
            render_requests=s.render_retention_seconds,
            tasks=s.task_retention_seconds,
            sweep_grace=s.artifact_sweep_grace_seconds,
        ),
    )


@router.get("", response_model=StorageOut)
async def get_storage(request: Request, principal: Admin) -> StorageOut:
    """Row counts, artefact store size and asset blobs of the whole node."""
    return storage_out(request, await retention_of(request).footprint())


@router.post("/sweep", response_model=SweepOut)
async def sweep_storage(request: Request, principal: Admin) -> SweepOut:
    """Prune what is past retention and sweep unreferenced artefacts and blobs, to the end.

    Objects written within `artifact_sweep_grace_seconds` are kept whatever refers to them.
    """
    retention = retention_of(request)
    sweeper = retention.sweeper.stats
    before = sweeper.objects_deleted + retention.stats.artifacts, sweeper.blobs_deleted
    requests = tasks = 0
    while True:
        r, t = await retention.prune_once()
        requests, tasks = requests + r, tasks + t
        if not r and not t:
            break
    before = retention.sweeper.stats.objects_deleted, retention.sweeper.stats.blobs_deleted
    pruned_artifacts = retention.stats.artifacts
    stats = await retention.sweeper.sweep()
    return SweepOut(
        render_requests_pruned=requests,
        tasks_pruned=tasks,
        objects_deleted=stats.objects_deleted
        - before[0]
        + retention.stats.artifacts
        - pruned_artifacts,
        blobs_deleted=stats.blobs_deleted - before[1],
        storage=storage_out(request, await retention.footprint()),
    )
