"""Every statement on the webhook tables (noun-first names: `endpoint_*`, `delivery_*`, ...).

Functions take the caller's connection; reads of one workspace's rows always carry its id in
the `WHERE` clause, so another workspace's endpoint is simply not found.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.webhooks.models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    Signing,
    WebhookEvent,
)
from deckyard.webhooks.schema import webhook_attempts, webhook_deliveries, webhook_endpoints

E = webhook_endpoints
D = webhook_deliveries
A = webhook_attempts
_ENDPOINT_COLUMNS = (
    E.c.id,
    E.c.workspace_id,
    E.c.url,
    E.c.description,
    E.c.events,
    E.c.enabled,
    E.c.events_since,
    E.c.created_at,
    E.c.updated_at,
    E.c.secret_rotated_at,
)
"""An endpoint's columns without its secrets."""


def _endpoint(row: Row[Any]) -> Endpoint:
    values = row._asdict()
    values["events"] = list(values["events"] or [])
    return Endpoint(**values)


def _delivery(row: Row[Any]) -> Delivery:
    values = row._asdict()
    values["status"] = DeliveryStatus(values["status"])
    return Delivery(**values)


# --- endpoints --------------------------------------------------------------------------------


async def endpoint_insert(conn: AsyncConnection, values: dict[str, Any]) -> Endpoint:
    """Insert an endpoint (`values` holds every column but the id)."""
    row = (await conn.execute(E.insert().values(values).returning(*_ENDPOINT_COLUMNS))).one()
    return _endpoint(row)


async def endpoint_count(conn: AsyncConnection, workspace_id: str) -> int:
    """How many endpoints a workspace has."""
    stmt = select(func.count()).select_from(E).where(E.c.workspace_id == workspace_id)
    return int((await conn.execute(stmt)).scalar_one())


async def endpoint_get(
    conn: AsyncConnection, workspace_id: str, endpoint_id: int
) -> Endpoint | None:
    """One endpoint of a workspace, or None (another workspace's is None too)."""
    row = (
        await conn.execute(
            select(*_ENDPOINT_COLUMNS).where(
                E.c.id == endpoint_id, E.c.workspace_id == workspace_id
            )
        )
    ).first()
    return None if row is None else _endpoint(row)


async def endpoint_list(conn: AsyncConnection, workspace_id: str) -> list[Endpoint]:
    """A workspace's endpoints, oldest first."""
    rows = await conn.execute(
        select(*_ENDPOINT_COLUMNS).where(E.c.workspace_id == workspace_id).order_by(E.c.id)
    )
    return [_endpoint(r) for r in rows]


async def endpoint_update(
    conn: AsyncConnection, workspace_id: str, endpoint_id: int, values: dict[str, Any]
) -> Endpoint | None:
    """Change an endpoint's columns; None when the workspace has no such endpoint."""
    row = (
        await conn.execute(
            update(E)
            .where(E.c.id == endpoint_id, E.c.workspace_id == workspace_id)
            .values(values)
            .returning(*_ENDPOINT_COLUMNS)
        )
    ).first()
    return None if row is None else _endpoint(row)


async def endpoint_delete(conn: AsyncConnection, workspace_id: str, endpoint_id: int) -> bool:
    """Delete an endpoint with its deliveries and attempts; False when there was none."""
    result = await conn.execute(
        delete(E).where(E.c.id == endpoint_id, E.c.workspace_id == workspace_id)
    )
    return bool(result.rowcount)


async def endpoint_rotate_secret(
    conn: AsyncConnection,
    workspace_id: str,
    endpoint_id: int,
    secret: str,
    previous_until: datetime | None,
    now: datetime,
) -> Endpoint | None:
    """Make `secret` the endpoint's secret; the old one still signs until `previous_until`
    (None: at once no more)."""
    keep = previous_until is not None
    return await endpoint_update(
        conn,
        workspace_id,
        endpoint_id,
        {
            "previous_secret": E.c.secret if keep else None,
            "previous_secret_expires_at": previous_until,
            "secret": secret,
            "secret_rotated_at": now,
            "updated_at": now,
        },
    )


async def endpoints_enabled(
    conn: AsyncConnection, *, workspace_id: str | None = None
) -> list[Endpoint]:
    """Enabled endpoints, of one workspace or of all; the caller filters by subscription."""
    stmt = select(*_ENDPOINT_COLUMNS).where(E.c.enabled.is_(True))
    if workspace_id is not None:
        stmt = stmt.where(E.c.workspace_id == workspace_id)
    return [_endpoint(r) for r in await conn.execute(stmt.order_by(E.c.id))]


async def endpoint_signing(
    conn: AsyncConnection, endpoint_id: int, now: datetime
) -> tuple[Endpoint, Signing] | None:
    """An endpoint with the secrets a delivery made `now` is signed with."""
    row = (
        await conn.execute(
            select(
                *_ENDPOINT_COLUMNS, E.c.secret, E.c.previous_secret, E.c.previous_secret_expires_at
            ).where(E.c.id == endpoint_id)
        )
    ).first()
    if row is None:
        return None
    values = row._asdict()
    secret = values.pop("secret")
    previous = values.pop("previous_secret")
    until = values.pop("previous_secret_expires_at")
    endpoint = Endpoint(**{**values, "events": list(values["events"] or [])})
    still = previous is not None and until is not None and until > now
    return endpoint, Signing(secret, previous if still else None)


# --- deliveries -------------------------------------------------------------------------------


async def deliveries_insert(
    db: Database,
    conn: AsyncConnection,
    event: WebhookEvent,
    endpoints: Sequence[Endpoint],
    now: datetime,
) -> list[int]:
    """Record `event` for each endpoint that has not had it yet; returns the new delivery ids.

    An endpoint that already has this event id (a retried commit, another node's relay) is
    skipped by the unique key, not duplicated.
    """
    made: list[int] = []
    body = event.body()
    for endpoint in endpoints:
        stmt = (
            db.insert_ignoring_conflicts(D, index_elements=["endpoint_id", "event_id"])
            .values(
                endpoint_id=endpoint.id,
                workspace_id=event.workspace_id,
                event_id=event.id,
                event_type=event.type.value,
                event_at=event.occurred_at,
                payload=body,
                status=DeliveryStatus.PENDING.value,
                attempts=0,
                created_at=now,
                updated_at=now,
            )
            .returning(D.c.id)
        )
        row = (await conn.execute(stmt)).first()
        if row is not None:
            made.append(int(row.id))
    return made


async def delivery_by_id(conn: AsyncConnection, delivery_id: int) -> Delivery | None:
    """One delivery by id, whatever its workspace (for its delivery job)."""
    row = (await conn.execute(select(D).where(D.c.id == delivery_id))).first()
    return None if row is None else _delivery(row)


async def delivery_get(
    conn: AsyncConnection, workspace_id: str, endpoint_id: int, delivery_id: int
) -> Delivery | None:
    """One delivery of a workspace's endpoint, or None."""
    row = (
        await conn.execute(
            select(D).where(
                D.c.id == delivery_id,
                D.c.endpoint_id == endpoint_id,
                D.c.workspace_id == workspace_id,
            )
        )
    ).first()
    return None if row is None else _delivery(row)


async def delivery_list(
    conn: AsyncConnection,
    workspace_id: str,
    endpoint_id: int,
    *,
    status: str | None,
    before_id: int | None,
    limit: int,
) -> list[Delivery]:
    """An endpoint's deliveries, newest first."""
    stmt = select(D).where(D.c.endpoint_id == endpoint_id, D.c.workspace_id == workspace_id)
    if status is not None:
        stmt = stmt.where(D.c.status == status)
    if before_id is not None:
        stmt = stmt.where(D.c.id < before_id)
    rows = await conn.execute(stmt.order_by(D.c.id.desc()).limit(limit))
    return [_delivery(r) for r in rows]


async def delivery_reopen(conn: AsyncConnection, delivery_id: int, now: datetime) -> bool:
    """Make a delivery pending again (a redeliver); False when it is gone."""
    result = await conn.execute(
        update(D)
        .where(D.c.id == delivery_id)
        .values(status=DeliveryStatus.PENDING.value, updated_at=now)
    )
    return bool(result.rowcount)


async def delivery_give_up(
    conn: AsyncConnection, delivery_id: int, error: str, now: datetime
) -> None:
    """Mark a pending delivery failed without an attempt (its endpoint is disabled)."""
    await conn.execute(
        update(D)
        .where(D.c.id == delivery_id, D.c.status == DeliveryStatus.PENDING.value)
        .values(status=DeliveryStatus.FAILED.value, last_error=error[:2000], updated_at=now)
    )


async def attempt_record(
    conn: AsyncConnection,
    delivery_id: int,
    *,
    job_id: int | None,
    started_at: datetime,
    duration_ms: int,
    status_code: int | None,
    error: str | None,
    outcome: DeliveryStatus,
    now: datetime,
) -> int | None:
    """Log one attempt and move its delivery to `outcome`; returns the attempt's number.

    The number comes from the delivery's counter, bumped in the same statement, so two
    attempts never share one. None when the delivery is gone (its endpoint was deleted).
    """
    values: dict[str, Any] = {
        "attempts": D.c.attempts + 1,
        "status": outcome.value,
        "last_status_code": status_code,
        "last_error": None if error is None else error[:2000],
        "updated_at": now,
    }
    if outcome is DeliveryStatus.SUCCEEDED:
        values["delivered_at"] = now
    row = (
        await conn.execute(
            update(D).where(D.c.id == delivery_id).values(values).returning(D.c.attempts)
        )
    ).first()
    if row is None:
        return None
    number = int(row.attempts)
    await conn.execute(
        A.insert().values(
            delivery_id=delivery_id,
            number=number,
            job_id=job_id,
            started_at=started_at,
            duration_ms=duration_ms,
            status_code=status_code,
            error=None if error is None else error[:2000],
        )
    )
    return number


async def attempts_of(conn: AsyncConnection, delivery_id: int) -> list[Attempt]:
    """A delivery's attempts, in order."""
    rows = await conn.execute(select(A).where(A.c.delivery_id == delivery_id).order_by(A.c.number))
    return [Attempt(**r._asdict()) for r in rows]


async def deliveries_latest_event_at(
    conn: AsyncConnection,
    event_types: Sequence[str],
    *,
    id_prefix: str | None = None,
    not_id_prefix: str | None = None,
) -> datetime | None:
    """When the newest event of these types that reached any endpoint happened (read only);
    only events whose id starts with `id_prefix`, and not with `not_id_prefix`, when given."""
    stmt = select(func.max(D.c.event_at)).where(D.c.event_type.in_(list(event_types)))
    if id_prefix is not None:
        stmt = stmt.where(D.c.event_id.startswith(id_prefix, autoescape=True))
    if not_id_prefix is not None:
        stmt = stmt.where(~D.c.event_id.startswith(not_id_prefix, autoescape=True))
    value: datetime | None = (await conn.execute(stmt)).scalar()
    return value


async def deliveries_prunable(conn: AsyncConnection, cutoff: datetime, limit: int) -> list[int]:
    """Ids of settled deliveries created before `cutoff`, oldest first (read only)."""
    rows = await conn.execute(
        select(D.c.id)
        .where(D.c.created_at < cutoff, D.c.status != DeliveryStatus.PENDING.value)
        .order_by(D.c.created_at)
        .limit(limit)
    )
    return [int(r.id) for r in rows]


async def deliveries_prune(conn: AsyncConnection, ids: Sequence[int]) -> int:
    """Delete these deliveries and their attempts; returns how many deliveries went."""
    if not ids:
        return 0
    await conn.execute(delete(A).where(A.c.delivery_id.in_(list(ids))))
    result = await conn.execute(delete(D).where(D.c.id.in_(list(ids))))
    return int(result.rowcount)
