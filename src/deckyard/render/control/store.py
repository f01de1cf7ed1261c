"""Every statement on the render tables: requests, their pages, attempts, renderers.

Noun-first names (`request_*`, `attempt_*`, `lease_*`, `page_*`, `renderer_*`, `occupancy_*`). Apart
from pruning (`store_retention`), nothing else in `render.control` touches these tables. Every state
change is guarded in its WHERE clause and returns whether it applied; callers check. A state change
wakes at commit (in process and, on PostgreSQL, through NOTIFY) only the channels whose listeners
have something new to do: `WAKE_REQUESTS` (waiters) when a request ends or is requeued,
`WAKE_DISPATCH` when a request becomes due or a slot is freed, `WAKE_ATTEMPTS` when an attempt takes
a slot under a lease, `WAKE_STOP` when a cancel must stop a running request.

An attempt's renderer is `render_attempts.renderer_id` (a `renderers.id`; in Python
`RenderAttempt.renderer_row_id`, since `Renderer.renderer_id` is the identity a renderer reports)
and `renderer_epoch`.

Every render request is a request of N pages, one row each: a deck's request renders every page
of a deck version, any other request one page, under one admission and one lease at a time.
Each page's result is committed on its own row by `page_commit`, a compare-and-set that applies
only while the committing attempt still holds its slots under a live lease, the request is
running, not cancelled and within its deadline, and the page is still pending: a late or
duplicate result is refused, so a page is committed exactly once. The commit of the last pending
page also ends the attempt and the request (`_request_end`). This is the only commit of a
render's result: there is no second path for a single picture.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    case,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.jobs.status import ACTIVE, ACTIVE_PREDICATE, TERMINAL
from deckyard.render.control.models import (
    ACTIVE_ATTEMPT,
    DECK_KIND,
    PAGE_COMMITTED,
    PAGE_PENDING,
    SCREENSHOT_KIND,
    WAKE_ATTEMPTS,
    WAKE_DISPATCH,
    WAKE_REQUESTS,
    WAKE_STOP,
    AttemptState,
    RenderAttempt,
    Renderer,
    RendererState,
    RenderPage,
    RenderRequest,
    RequestStatus,
)
from deckyard.render.control.schema import (
    render_attempts,
    render_pages,
    render_requests,
    renderers,
)
from deckyard.render.protocol import RenderErrorCode

R = render_requests
A = render_attempts
N = renderers
P = render_pages
RENDERER_COLUMNS = tuple(N.c)
REQUEST_COLUMNS = tuple(R.c)
ATTEMPT_COLUMNS = tuple(A.c)


@dataclass(frozen=True)
class NewRequest:
    """Everything needed to insert one render request."""

    kind: str
    workspace_id: str
    input: dict[str, Any]
    input_hash: str
    max_attempts: int
    deadline_at: datetime
    dedupe_key: str | None = None
    parent_job_id: int | None = None


ENDED = (WAKE_REQUESTS, WAKE_DISPATCH)
"""What a request ending or being requeued wakes: its waiters, and the dispatch (a slot is free,
or the request is due again)."""


def wake_on_commit(db: Database, conn: AsyncConnection, channels: Sequence[str] = ENDED) -> None:
    """Wake `channels` when this transaction commits.

    Each loop of the coordinator listens to its own channel, so a state change wakes only the
    loops with something new to do (a render state change used to wake all three, and their
    reads queued before the one that mattered).
    """
    for channel in channels:
        db.notify(conn, channel)


async def request_insert(
    db: Database, conn: AsyncConnection, new: NewRequest, now: datetime
) -> tuple[RenderRequest, bool]:
    """Insert a request with its pending pages (a deck's every page; one for any other
    request), or return the active one with the same dedupe key: (request, created)."""
    row = {
        "kind": new.kind,
        "workspace_id": new.workspace_id,
        "input": new.input,
        "input_hash": new.input_hash,
        "dedupe_key": new.dedupe_key,
        "status": RequestStatus.PENDING.value,
        "attempts": 0,
        "max_attempts": new.max_attempts,
        "deadline_at": new.deadline_at,
        "retry_after": now,
        "parent_job_id": new.parent_job_id,
        "created_at": now,
        "updated_at": now,
    }
    stmt = (
        db.insert_ignoring_conflicts(
            R,
            index_elements=["dedupe_key"],
            index_where=text(f"dedupe_key IS NOT NULL AND {ACTIVE_PREDICATE}"),
        )
        .values(row)
        .returning(*REQUEST_COLUMNS)
    )
    inserted = (await conn.execute(stmt)).first()
    if inserted is not None:
        request = RenderRequest.from_row(inserted)
        pages = len(new.input["pages"]) if new.kind == DECK_KIND else 1
        await conn.execute(
            insert(P),
            [
                {"request_id": request.id, "page_index": i, "status": PAGE_PENDING}
                for i in range(pages)
            ],
        )
        wake_on_commit(db, conn, (WAKE_DISPATCH,))
        return request, True
    existing = (
        await conn.execute(
            select(*REQUEST_COLUMNS).where(R.c.dedupe_key == new.dedupe_key, R.c.status.in_(ACTIVE))
        )
    ).one()
    return RenderRequest.from_row(existing), False


async def request_adopt(conn: AsyncConnection, request_id: int, job_id: int, now: datetime) -> bool:
    """Make `job_id` the parent of an active request it joined, so cancelling the job reaches it."""
    result = await conn.execute(
        update(R)
        .where(
            R.c.id == request_id,
            R.c.status.in_(ACTIVE),
            R.c.parent_job_id.is_distinct_from(job_id),
        )
        .values(parent_job_id=job_id, updated_at=now)
    )
    return result.rowcount == 1


async def request_get(conn: AsyncConnection, request_id: int) -> RenderRequest | None:
    """One request by id."""
    row = (await conn.execute(select(*REQUEST_COLUMNS).where(R.c.id == request_id))).first()
    return RenderRequest.from_row(row) if row is not None else None


STATE_COLUMNS = tuple(c for c in R.c if c.name != "input")


async def request_state(conn: AsyncConnection, request_id: int) -> RenderRequest | None:
    """One request without its `input` (`input` is None): a waiter never needs the document.

    A page's document can be most of a megabyte; a waiter reads the row at every request
    state change, and decoding that each time was a good part of a validation's CPU.
    """
    row = (await conn.execute(select(*STATE_COLUMNS).where(R.c.id == request_id))).first()
    if row is None:
        return None
    values = row._asdict()
    values["status"] = RequestStatus(values["status"])
    return RenderRequest(input=None, **values)


async def request_captures(conn: AsyncConnection, request_id: int) -> bool | None:
    """Whether a request asked for a picture (its input's `capture`, true unless set false);
    None when there is no such request. Reads that one flag, not the document."""
    flag = R.c.input["capture"].as_boolean()
    row = (await conn.execute(select(R.c.id, flag).where(R.c.id == request_id))).first()
    if row is None:
        return None
    return row[1] is not False


async def requests_state(
    conn: AsyncConnection, request_ids: Sequence[int]
) -> dict[int, RenderRequest]:
    """The requests of `request_ids` that exist, without their `input`, by id: one read for
    every waiter or follower of a node (`requests.request_waiters`, `RequestFollowers`)."""
    rows = await conn.execute(select(*STATE_COLUMNS).where(R.c.id.in_(request_ids)))
    found: dict[int, RenderRequest] = {}
    for row in rows:
        values = row._asdict()
        values["status"] = RequestStatus(values["status"])
        found[values["id"]] = RenderRequest(input=None, **values)
    return found


async def requests_ended(
    conn: AsyncConnection, request_ids: Sequence[int]
) -> tuple[dict[int, RenderRequest], set[int]]:
    """Of `request_ids`, the terminal requests without their `input` (by id), and the ids no
    request has (`requests.request_waiters`)."""
    found = await requests_state(conn, request_ids)
    ended = {i: request for i, request in found.items() if request.is_terminal}
    return ended, set(request_ids) - set(found)


async def renders_queued(conn: AsyncConnection, workspace_id: str) -> tuple[int, int]:
    """What the queue limits count, read under the admission lock: every active one-page
    request and every page still to render of an active deck request, each one render
    (everyone's, this workspace's)."""
    single = select(R.c.workspace_id.label("ws")).where(
        R.c.kind == SCREENSHOT_KIND, R.c.status.in_(ACTIVE)
    )
    pages = (
        select(R.c.workspace_id.label("ws"))
        .select_from(P.join(R, R.c.id == P.c.request_id))
        .where(P.c.status == PAGE_PENDING, R.c.kind == DECK_KIND, R.c.status.in_(ACTIVE))
    )
    queued = union_all(single, pages).subquery()
    rows = await conn.execute(select(queued.c.ws, func.count()).group_by(queued.c.ws))
    counts = {str(r[0]): int(r[1]) for r in rows}
    return sum(counts.values()), counts.get(workspace_id, 0)


async def request_active_by_dedupe(conn: AsyncConnection, dedupe_key: str) -> RenderRequest | None:
    """The active request with `dedupe_key`, if any."""
    row = (
        await conn.execute(
            select(*REQUEST_COLUMNS).where(R.c.dedupe_key == dedupe_key, R.c.status.in_(ACTIVE))
        )
    ).first()
    return RenderRequest.from_row(row) if row is not None else None


async def _cancel_matching(
    db: Database, conn: AsyncConnection, match: ColumnElement[bool], now: datetime
) -> int:
    """Cancel the active requests `match` selects: pending ones end now, running ones are asked
    to stop. Wakes the request waiters on commit when any was touched; returns how many.

    One statement for both, so a request is cancelled whichever of the two it is when the
    statement reaches its row: on PostgreSQL a row a concurrent transaction holds (a requeue,
    an admission) is checked again once that commits. With one statement per status, a requeue
    (running to pending) committed between them escaped both, and the cancel was lost.
    """
    pending = R.c.status == RequestStatus.PENDING.value
    result = await conn.execute(
        update(R)
        .where(
            match,
            or_(
                pending,
                and_(
                    R.c.status == RequestStatus.RUNNING.value,
                    R.c.cancel_requested_at.is_(None),
                ),
            ),
        )
        .values(
            status=case((pending, RequestStatus.CANCELLED.value), else_=R.c.status),
            cancel_requested_at=now,
            error_code=case((pending, RenderErrorCode.CANCELLED.value), else_=R.c.error_code),
            error_message=case(
                (pending, "cancelled before an attempt started"), else_=R.c.error_message
            ),
            finished_at=case((pending, literal(now, R.c.finished_at.type)), else_=R.c.finished_at),
            updated_at=now,
        )
    )
    touched = int(result.rowcount)
    if touched:
        wake_on_commit(db, conn, (*ENDED, WAKE_STOP))
    return touched


async def request_cancel(
    db: Database, conn: AsyncConnection, request_id: int, now: datetime
) -> int:
    """Cancel one active request: a pending one ends now, a running one is asked to stop."""
    return await _cancel_matching(db, conn, R.c.id == request_id, now)


async def request_retry(
    db: Database, conn: AsyncConnection, request_id: int, deadline_at: datetime, now: datetime
) -> bool:
    """Make a failed or cancelled request pending again, with a fresh attempt budget and
    deadline, its error, result and page are cleared; False when it is not failed or cancelled.

    Raises the database's unique violation when another active request holds its dedupe key
    (the caller checks first, under the admission lock).
    """
    result = await conn.execute(
        update(R)
        .where(
            R.c.id == request_id,
            R.c.status.in_([RequestStatus.FAILED.value, RequestStatus.CANCELLED.value]),
        )
        .values(
            status=RequestStatus.PENDING.value,
            attempts=0,
            deadline_at=deadline_at,
            retry_after=now,
            cancel_requested_at=None,
            result=None,
            error_code=None,
            error_message=None,
            artifact_key=None,
            finished_at=None,
            updated_at=now,
        )
    )
    if result.rowcount != 1:
        return False
    await conn.execute(
        update(P)
        .where(P.c.request_id == request_id)
        .values(
            status=PAGE_PENDING,
            attempt_id=None,
            result=None,
            artifact_key=None,
            error_code=None,
            error_message=None,
            committed_at=None,
        )
    )
    wake_on_commit(db, conn, ENDED)
    return True


async def requests_of_workspace(
    conn: AsyncConnection, workspace_id: str, *, before_id: int | None, limit: int
) -> list[RenderRequest]:
    """The workspace's requests without their `input`, newest first, below `before_id`."""
    query = select(*STATE_COLUMNS).where(R.c.workspace_id == workspace_id)
    if before_id is not None:
        query = query.where(R.c.id < before_id)
    rows = await conn.execute(query.order_by(R.c.id.desc()).limit(limit))
    found = []
    for row in rows:
        values = row._asdict()
        values["status"] = RequestStatus(values["status"])
        found.append(RenderRequest(input=None, **values))
    return found


async def requests_kept_finished_after(
    conn: AsyncConnection, after: tuple[datetime, int], workspace_ids: Sequence[str], limit: int
) -> list[RenderRequest]:
    """Ended one-page requests no job opened and that took a picture (screenshots, not
    validations) of these workspaces, past `after` (finished_at, id), oldest first, without
    their `input` (read only; uses `ix_render_requests_finished`)."""
    at, request_id = after
    rows = await conn.execute(
        select(*STATE_COLUMNS)
        .where(
            R.c.status.in_(TERMINAL),
            R.c.finished_at >= at,
            or_(R.c.finished_at > at, R.c.id > request_id),
            R.c.workspace_id.in_(list(workspace_ids)),
            R.c.kind == SCREENSHOT_KIND,
            R.c.parent_job_id.is_(None),
            R.c.input["capture"].as_boolean().is_not(False),
        )
        .order_by(R.c.finished_at, R.c.id)
        .limit(limit)
    )
    found = []
    for row in rows:
        values = row._asdict()
        values["status"] = RequestStatus(values["status"])
        found.append(RenderRequest(input=None, **values))
    return found


async def request_latest_of_job(conn: AsyncConnection, job_id: int) -> RenderRequest | None:
    """The newest request a job opened, if any."""
    request_id = (
        await conn.execute(select(func.max(R.c.id)).where(R.c.parent_job_id == job_id))
    ).scalar_one_or_none()
    return None if request_id is None else await request_get(conn, request_id)


async def request_counts(conn: AsyncConnection) -> list[tuple[str, str, int]]:
    """How many requests there are per (status, error code); no error code counts as ""."""
    rows = await conn.execute(
        select(R.c.status, R.c.error_code, func.count()).group_by(R.c.status, R.c.error_code)
    )
    return [(str(r[0]), str(r[1] or ""), int(r[2])) for r in rows]


async def requests_due(conn: AsyncConnection, now: datetime, limit: int) -> list[RenderRequest]:
    """Pending requests whose `retry_after` has come, oldest first."""
    rows = await conn.execute(
        select(*REQUEST_COLUMNS)
        .where(R.c.status == RequestStatus.PENDING.value, R.c.retry_after <= now)
        .order_by(R.c.retry_after, R.c.id)
        .limit(limit)
    )
    return [RenderRequest.from_row(r) for r in rows]


async def request_next_due(conn: AsyncConnection) -> datetime | None:
    """The earliest `retry_after` of a pending request, or None when nothing is pending."""
    due: datetime | None = (
        await conn.execute(
            select(func.min(R.c.retry_after)).where(R.c.status == RequestStatus.PENDING.value)
        )
    ).scalar_one_or_none()
    return due


async def requests_running_overdue_or_cancelled(
    conn: AsyncConnection, now: datetime
) -> list[RenderRequest]:
    """Running requests that were cancelled or whose deadline has passed."""
    rows = await conn.execute(
        select(*REQUEST_COLUMNS).where(
            R.c.status == RequestStatus.RUNNING.value,
            (R.c.cancel_requested_at.is_not(None)) | (R.c.deadline_at <= now),
        )
    )
    return [RenderRequest.from_row(r) for r in rows]


async def request_finish(
    db: Database,
    conn: AsyncConnection,
    request_id: int,
    status: RequestStatus,
    now: datetime,
    *,
    code: str | None = None,
    message: str | None = None,
    from_status: Sequence[str] = ACTIVE,
    uncancelled: bool = False,
) -> bool:
    """End an active request as failed or cancelled (never succeeded: see `page_commit`).

    With `uncancelled` it applies only while no cancel was requested.
    """
    guards = [R.c.id == request_id, R.c.status.in_(list(from_status))]
    if uncancelled:
        guards.append(R.c.cancel_requested_at.is_(None))
    result = await conn.execute(
        update(R)
        .where(*guards)
        .values(
            status=status.value,
            error_code=code,
            error_message=(message or code or "")[:2000] or None,
            finished_at=now,
            updated_at=now,
        )
    )
    if result.rowcount == 1:
        wake_on_commit(db, conn)
        return True
    return False


async def request_requeue_or_fail(
    db: Database,
    conn: AsyncConnection,
    request_id: int,
    *,
    code: str,
    message: str,
    retryable: bool,
    retry_at: datetime,
    now: datetime,
    refund: bool = False,
) -> RequestStatus | None:
    """After an attempt ended without a result: back to pending, or failed when spent.

    With `refund` the attempt does not count against the budget (the renderer refused it
    before starting, e.g. every one of its slots was still busy).

    A cancelled request ends cancelled. The request is retried only while the error is
    retryable, attempts remain and `retry_at` is before its deadline; otherwise it fails with
    `code`, or with `RENDER_DEADLINE_EXCEEDED` once the deadline is what stops it. The requeue
    and the failure apply only while no cancel was requested; when that guard refuses because
    a cancel committed after the request was read, the request ends cancelled all the same.
    """
    req = await request_get(conn, request_id)
    if req is None or req.status is not RequestStatus.RUNNING:
        return None
    if req.cancel_requested_at is None:
        ended = await _request_requeue_or_fail_uncancelled(
            db,
            conn,
            req,
            code=code,
            message=message,
            retryable=retryable,
            retry_at=retry_at,
            now=now,
            refund=refund,
        )
        if ended is not None:
            return ended
        state = await request_state(conn, request_id)
        if (
            state is None
            or state.status is not RequestStatus.RUNNING
            or state.cancel_requested_at is None
        ):
            return None
    done = await request_finish(
        db,
        conn,
        request_id,
        RequestStatus.CANCELLED,
        now,
        code=RenderErrorCode.CANCELLED,
        from_status=[RequestStatus.RUNNING.value],
    )
    return RequestStatus.CANCELLED if done else None


async def _request_requeue_or_fail_uncancelled(
    db: Database,
    conn: AsyncConnection,
    req: RenderRequest,
    *,
    code: str,
    message: str,
    retryable: bool,
    retry_at: datetime,
    now: datetime,
    refund: bool,
) -> RequestStatus | None:
    """`request_requeue_or_fail` for a running request read without a cancel: pending or
    failed, each guarded on no cancel requested since; None when the guard refused."""
    spent = req.attempts - (1 if refund else 0)
    if retryable and spent < req.max_attempts and retry_at < req.deadline_at:
        result = await conn.execute(
            update(R)
            .where(
                R.c.id == req.id,
                R.c.status == RequestStatus.RUNNING.value,
                R.c.cancel_requested_at.is_(None),
            )
            .values(
                status=RequestStatus.PENDING.value,
                attempts=spent,
                retry_after=retry_at,
                error_code=code,
                error_message=message[:2000],
                updated_at=now,
            )
        )
        if result.rowcount == 1:
            wake_on_commit(db, conn)
            return RequestStatus.PENDING
        return None
    if retryable and req.deadline_at <= retry_at:
        code = RenderErrorCode.DEADLINE_EXCEEDED.value
        message = f"the request's deadline passed after {req.attempts} attempt(s): {message}"
    done = await request_finish(
        db,
        conn,
        req.id,
        RequestStatus.FAILED,
        now,
        code=code,
        message=message,
        from_status=[RequestStatus.RUNNING.value],
        uncancelled=True,
    )
    return RequestStatus.FAILED if done else None


async def request_cancel_for_jobs(
    db: Database, conn: AsyncConnection, job_ids: Sequence[int], now: datetime
) -> int:
    """Cancel the active requests of these jobs: pending ones end now, running ones are asked.

    Runs inside the job cancel's own transaction (a `Runtime.on_cancel` hook), so a cancelled
    job never leaves a live request behind. Returns how many requests it touched.
    """
    return await _cancel_matching(db, conn, R.c.parent_job_id.in_(list(job_ids)), now)


async def request_admit(
    db: Database,
    conn: AsyncConnection,
    request: RenderRequest,
    *,
    renderer_row_id: int,
    epoch: str,
    slot: int,
    attempt_key: str,
    timeout_seconds: float,
    lease_seconds: float,
    now: datetime,
    extra_slots: Sequence[int] = (),
) -> RenderAttempt | None:
    """Move a pending request to running and give it an attempt on a slot; None if it moved.

    `extra_slots` are more slots of the same renderer for a deck attempt (see the schema).
    """
    moved = await conn.execute(
        update(R)
        .where(
            R.c.id == request.id,
            R.c.status == RequestStatus.PENDING.value,
            R.c.cancel_requested_at.is_(None),
            R.c.retry_after <= now,
        )
        .values(status=RequestStatus.RUNNING.value, attempts=R.c.attempts + 1, updated_at=now)
    )
    if moved.rowcount != 1:
        return None
    row = (
        await conn.execute(
            insert(A)
            .values(
                request_id=request.id,
                attempt_key=attempt_key,
                workspace_id=request.workspace_id,
                renderer_id=renderer_row_id,
                renderer_epoch=epoch,
                slot=slot,
                extra_slots=list(extra_slots) or None,
                active_occupancy=1,
                status=AttemptState.ADMITTED.value,
                timeout_seconds=timeout_seconds,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                created_at=now,
                updated_at=now,
            )
            .returning(*ATTEMPT_COLUMNS)
        )
    ).one()
    wake_on_commit(db, conn, (WAKE_ATTEMPTS,))
    return RenderAttempt.from_row(row)


@dataclass
class Occupancy:
    """Who holds slots right now."""

    total: int = 0
    by_workspace: Counter[str] = field(default_factory=Counter)
    taken: dict[tuple[int, str], set[int]] = field(default_factory=dict)


async def occupancy_snapshot(conn: AsyncConnection) -> Occupancy:
    """Every held slot, counted globally, per workspace and per renderer epoch.

    A deck attempt counts once per slot it holds (`slot` and its `extra_slots`).
    """
    rows = await conn.execute(
        select(
            A.c.workspace_id, A.c.renderer_id, A.c.renderer_epoch, A.c.slot, A.c.extra_slots
        ).where(A.c.active_occupancy == 1)
    )
    occ = Occupancy()
    for row in rows:
        slots = [row.slot, *(row.extra_slots or [])]
        occ.total += len(slots)
        occ.by_workspace[row.workspace_id] += len(slots)
        occ.taken.setdefault((row.renderer_id, row.renderer_epoch), set()).update(slots)
    return occ


async def renderer_list(conn: AsyncConnection) -> list[Renderer]:
    """Every known renderer."""
    rows = await conn.execute(select(*RENDERER_COLUMNS).order_by(N.c.id))
    return [Renderer.from_row(r) for r in rows]


@dataclass(frozen=True)
class RendererSeen:
    """What a probe learnt about a renderer: None fields when it did not answer."""

    name: str
    url: str
    state: RendererState
    renderer_id: str | None = None
    epoch: str | None = None
    slots: int | None = None
    error: str | None = None
    draining_since: datetime | None = None
    """The row's `draining_since` to keep: when its current epoch began draining, or None."""


async def renderer_upsert_if_changed(
    conn: AsyncConnection, known: Renderer | None, seen: RendererSeen, now: datetime
) -> Renderer:
    """Insert the renderer, or update its row when url, epoch, slots, state or drain changed.

    An unreachable renderer keeps its last epoch and slots: only its state changes.
    """
    values: dict[str, Any] = {
        "url": seen.url,
        "state": seen.state.value,
        "error": seen.error,
        "draining_since": seen.draining_since,
    }
    if seen.epoch is not None:
        values.update(renderer_id=seen.renderer_id, epoch=seen.epoch, slots=seen.slots)
    if known is None:
        values.setdefault("slots", 0)
        row = (
            await conn.execute(
                N.insert()
                .values(name=seen.name, created_at=now, updated_at=now, **values)
                .returning(*RENDERER_COLUMNS)
            )
        ).one()
        return Renderer.from_row(row)
    updated = (
        await conn.execute(
            update(N)
            .where(N.c.id == known.id, N.c.updated_at == known.updated_at)
            .values(updated_at=now, **values)
            .returning(*RENDERER_COLUMNS)
        )
    ).first()
    if updated is None:
        raise RendererChangedConcurrently(seen.name)
    return Renderer.from_row(updated)


class RendererChangedConcurrently(Exception):
    """Another node updated the renderer row between our read and our write; probe again."""


async def renderer_drain(
    conn: AsyncConnection, renderer_row_id: int, now: datetime
) -> Renderer | None:
    """Mark a renderer draining from `now`; None when there is no such renderer.

    From the commit on, no node admits attempts to it (`Renderer.admits`). Applies once: a
    renderer already draining keeps its `draining_since`. One that is down becomes `drained`.
    Call under the admission lock, so that no admission which read the row before this commits
    after it.
    """
    down = N.c.state == RendererState.DOWN.value
    marked = (
        await conn.execute(
            update(N)
            .where(N.c.id == renderer_row_id, N.c.draining_since.is_(None))
            .values(
                draining_since=now,
                state=case((down, RendererState.DRAINED.value), else_=RendererState.DRAINING.value),
                updated_at=now,
            )
            .returning(*RENDERER_COLUMNS)
        )
    ).first()
    if marked is None:
        marked = (
            await conn.execute(select(*RENDERER_COLUMNS).where(N.c.id == renderer_row_id))
        ).first()
    return Renderer.from_row(marked) if marked is not None else None


DRAIN_HANDBACK_CODES = (RenderErrorCode.WORKER_STOPPED.value, RenderErrorCode.RESULT_LOST.value)
"""How attempts a drain took back end: handed back at the drain's bound, or lost with the
renderer's exit (its epoch changed, or its lease expired)."""


async def attempt_handed_back_by_drain(
    conn: AsyncConnection, attempt: RenderAttempt, code: str
) -> bool:
    """Whether an attempt that ended with `code` was given back by its renderer's drain: the
    renderer row drains the attempt's epoch. Such an attempt costs the request nothing."""
    if code not in DRAIN_HANDBACK_CODES:
        return False
    row = (
        await conn.execute(
            select(N.c.draining_since, N.c.epoch).where(N.c.id == attempt.renderer_row_id)
        )
    ).first()
    return (
        row is not None and row.draining_since is not None and row.epoch == attempt.renderer_epoch
    )


def renderer_differs(known: Renderer | None, seen: RendererSeen) -> bool:
    """Whether writing `seen` would change anything about the stored renderer."""
    if known is None:
        return True
    if known.url != seen.url or known.state is not seen.state or known.error != seen.error:
        return True
    if known.draining_since != seen.draining_since:
        return True
    if seen.epoch is None:
        return False
    return (known.epoch, known.slots, known.renderer_id) != (
        seen.epoch,
        seen.slots,
        seen.renderer_id,
    )


# --- attempts after admission: leases, releases, the result commit, recovery ---------------
#
# An attempt holds its renderer slot while `active_occupancy = 1`; the partial unique index on
# `(renderer_id, renderer_epoch, slot) WHERE active_occupancy = 1` makes a second holder impossible.
# Every function that ends an attempt clears `active_occupancy` in the same guarded UPDATE.


class ResultRefused(Exception):
    """The result CAS lost: the slot, the lease, the request or its deadline no longer allow it.

    Raised inside the commit transaction so that everything it wrote is rolled back.
    """


async def attempts_active(conn: AsyncConnection) -> list[RenderAttempt]:
    """Attempts that hold a slot."""
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(A.c.active_occupancy == 1).order_by(A.c.id)
    )
    return [RenderAttempt.from_row(r) for r in rows]


async def attempts_of_request(conn: AsyncConnection, request_id: int) -> list[RenderAttempt]:
    """Every attempt of one request, oldest first."""
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(A.c.request_id == request_id).order_by(A.c.id)
    )
    return [RenderAttempt.from_row(r) for r in rows]


async def lease_next_expiry(conn: AsyncConnection) -> datetime | None:
    """The nearest lease expiry among slot holders, or None when no slot is held."""
    nearest: datetime | None = (
        await conn.execute(select(func.min(A.c.lease_expires_at)).where(A.c.active_occupancy == 1))
    ).scalar_one_or_none()
    return nearest


async def lease_renew(
    conn: AsyncConnection,
    attempt_ids: Sequence[int],
    receipt_status: str,
    now: datetime,
    lease_seconds: float,
) -> set[int]:
    """Extend the leases of attempts a real live receipt just vouched for: one UPDATE.

    A lease that already expired is not revived, even before recovery has run: the attempt is
    lost and its result will be refused.
    """
    if not attempt_ids:
        return set()
    rows = await conn.execute(
        update(A)
        .where(
            A.c.id.in_(list(attempt_ids)),
            A.c.active_occupancy == 1,
            A.c.status.in_(ACTIVE_ATTEMPT),
            A.c.lease_expires_at > now,
        )
        .values(
            status=AttemptState.RUNNING.value,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            last_receipt_at=now,
            last_receipt_status=receipt_status,
            updated_at=now,
        )
        .returning(A.c.id)
    )
    return {r.id for r in rows}


async def attempt_release(
    db: Database,
    conn: AsyncConnection,
    attempt_id: int,
    state: AttemptState,
    now: datetime,
    *,
    code: str | None = None,
    message: str | None = None,
) -> bool:
    """End an attempt that still holds its slot, freeing the slot."""
    result = await conn.execute(
        update(A)
        .where(A.c.id == attempt_id, A.c.active_occupancy == 1)
        .values(
            active_occupancy=0,
            status=state.value,
            error_code=code,
            error_message=(message or "")[:2000] or None,
            finished_at=now,
            updated_at=now,
        )
    )
    if result.rowcount == 1:
        wake_on_commit(db, conn, (WAKE_DISPATCH,))
        return True
    return False


async def attempt_end(
    db: Database,
    conn: AsyncConnection,
    attempt: RenderAttempt,
    state: AttemptState,
    *,
    code: str,
    message: str,
    retryable: bool,
    retry_after_seconds: float,
    now: datetime,
    refund: bool = False,
) -> RequestStatus | None:
    """Release an attempt that produced no result and requeue or fail its request.

    A deck attempt that committed a page made progress: like a `refund`, it does not count
    against the request's budget, so a deck lost twice at different pages goes on while it
    advances (each refund needs a page more; the deadline still bounds it). Nor does an
    attempt a draining renderer handed back or lost on its way out
    (`attempt_handed_back_by_drain`).
    Returns the request's new status, or None when the attempt had already been released.
    """
    if not await attempt_release(db, conn, attempt.id, state, now, code=code, message=message):
        return None
    if not refund:
        refund = await attempt_handed_back_by_drain(conn, attempt, code)
    if not refund:
        pg = render_pages.c
        progressed = await conn.execute(
            select(pg.id)
            .where(pg.request_id == attempt.request_id, pg.attempt_id == attempt.id)
            .limit(1)
        )
        refund = progressed.first() is not None
    return await request_requeue_or_fail(
        db,
        conn,
        attempt.request_id,
        code=code,
        message=message,
        retryable=retryable,
        retry_at=now + timedelta(seconds=retry_after_seconds),
        now=now,
        refund=refund,
    )


async def attempts_recover_expired(
    db: Database, conn: AsyncConnection, now: datetime, retry_after_seconds: float
) -> list[int]:
    """Release every slot whose lease expired, mark those attempts lost, requeue their requests."""
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(A.c.active_occupancy == 1, A.c.lease_expires_at <= now)
    )
    lost: list[int] = []
    for attempt in [RenderAttempt.from_row(r) for r in rows]:
        status = await attempt_end(
            db,
            conn,
            attempt,
            AttemptState.LOST,
            code=RenderErrorCode.RESULT_LOST.value,
            message="no live receipt before the lease expired",
            retryable=True,
            retry_after_seconds=retry_after_seconds,
            now=now,
        )
        if status is not None:
            lost.append(attempt.id)
    return lost


async def attempts_reconcile_epoch(
    db: Database,
    conn: AsyncConnection,
    renderer_row_id: int,
    epoch: str,
    now: datetime,
    retry_after_seconds: float,
    *,
    refund: bool = False,
) -> list[int]:
    """A renderer restarted with `epoch`: every attempt it held under another epoch is lost now.

    With `refund` (the old epoch was draining) they do not count against their requests.
    """
    rows = await conn.execute(
        select(*ATTEMPT_COLUMNS).where(
            A.c.active_occupancy == 1,
            A.c.renderer_id == renderer_row_id,
            A.c.renderer_epoch != epoch,
        )
    )
    lost: list[int] = []
    for attempt in [RenderAttempt.from_row(r) for r in rows]:
        status = await attempt_end(
            db,
            conn,
            attempt,
            AttemptState.LOST,
            code=RenderErrorCode.RESULT_LOST.value,
            message=f"the renderer restarted (epoch {attempt.renderer_epoch} -> {epoch})",
            retryable=True,
            retry_after_seconds=retry_after_seconds,
            now=now,
            refund=refund,
        )
        if status is not None:
            lost.append(attempt.id)
    return lost


# --- pages: one row per page of a request; `page_commit` is the one commit of a result ---


async def pages_of_request(conn: AsyncConnection, request_id: int) -> list[RenderPage]:
    """Every page of a deck request, in page order."""
    rows = await conn.execute(
        select(*P.c).where(P.c.request_id == request_id).order_by(P.c.page_index)
    )
    return [RenderPage.from_row(r) for r in rows]


async def pages_pending(conn: AsyncConnection, request_id: int) -> list[int]:
    """The indices of the pages of a deck request that have no committed result yet."""
    rows = await conn.execute(
        select(P.c.page_index)
        .where(P.c.request_id == request_id, P.c.status == PAGE_PENDING)
        .order_by(P.c.page_index)
    )
    return [int(r.page_index) for r in rows]


async def page_commit(
    db: Database,
    conn: AsyncConnection,
    attempt: RenderAttempt,
    index: int,
    *,
    result: dict[str, Any] | None,
    artifact_key: str | None,
    error_code: str | None,
    error_message: str | None,
    now: datetime,
) -> bool:
    """Commit one page's result with a compare-and-set, or raise `ResultRefused`.

    The attempt row is touched first (slot held, active, lease not expired): on PostgreSQL that row
    lock orders this commit against a concurrent release or recovery of the attempt; on SQLite the
    writer lock does. Returns True when this was the request's last pending page (the attempt and
    the request then ended in this transaction, as `_request_end` says). Raising rolls back the
    caller's transaction.


    The request is read, not locked, before the page is written: on PostgreSQL a cancel can
    commit after that read, so the statement that ends the request carries the same guards.
    When they refuse, the last page is refused too, and the attempt, still holding its slots,
    is ended with the request as the cancel demands (the receipt pass stops it, or its end
    finds the cancel: `request_requeue_or_fail`).
    """
    held = await conn.execute(
        update(A)
        .where(
            A.c.id == attempt.id,
            A.c.active_occupancy == 1,
            A.c.status.in_(ACTIVE_ATTEMPT),
            A.c.lease_expires_at > now,
        )
        .values(updated_at=now)
    )
    if held.rowcount != 1:
        raise ResultRefused(f"attempt {attempt.attempt_key}: its slots or lease are gone")
    live = (
        await conn.execute(
            select(R.c.kind).where(
                R.c.id == attempt.request_id,
                R.c.status == RequestStatus.RUNNING.value,
                R.c.cancel_requested_at.is_(None),
                R.c.deadline_at > now,
            )
        )
    ).first()
    if live is None:
        raise ResultRefused(
            f"request {attempt.request_id} was cancelled, passed its deadline or ended"
        )
    done = await conn.execute(
        update(P)
        .where(
            P.c.request_id == attempt.request_id,
            P.c.page_index == index,
            P.c.status == PAGE_PENDING,
        )
        .values(
            status=PAGE_COMMITTED,
            attempt_id=attempt.id,
            result=result,
            artifact_key=artifact_key,
            error_code=error_code,
            error_message=(error_message or "")[:2000] or None,
            committed_at=now,
        )
    )
    if done.rowcount != 1:
        raise ResultRefused(f"request {attempt.request_id} page {index}: already committed")
    left = (
        await conn.execute(
            select(func.count()).where(
                P.c.request_id == attempt.request_id, P.c.status == PAGE_PENDING
            )
        )
    ).scalar_one()
    if left:
        return False
    failed = live.kind != DECK_KIND and error_code is not None
    await conn.execute(
        update(A)
        .where(A.c.id == attempt.id, A.c.active_occupancy == 1)
        .values(
            active_occupancy=0,
            status=(AttemptState.FAILED if failed else AttemptState.SUCCEEDED).value,
            last_receipt_status=AttemptState.SUCCEEDED.value,
            error_code=error_code if failed else None,
            error_message=(error_message or "")[:2000] or None if failed else None,
            finished_at=now,
            updated_at=now,
        )
    )
    ended = await conn.execute(
        update(R)
        .where(
            R.c.id == attempt.request_id,
            R.c.status == RequestStatus.RUNNING.value,
            R.c.cancel_requested_at.is_(None),
            R.c.deadline_at > now,
        )
        .values(
            **await _request_end(conn, attempt, live.kind, result, artifact_key, failed),
            error_code=error_code if failed else None,
            error_message=(error_message or "")[:2000] or None if failed else None,
            finished_at=now,
            updated_at=now,
        )
    )
    if ended.rowcount != 1:
        raise ResultRefused(
            f"request {attempt.request_id} was cancelled, passed its deadline or ended"
        )
    wake_on_commit(db, conn)
    return True


async def _request_end(
    conn: AsyncConnection,
    attempt: RenderAttempt,
    kind: str,
    result: dict[str, Any] | None,
    artifact_key: str | None,
    failed: bool,
) -> dict[str, Any]:
    """What a request's row says once its last page is committed.

    A deck's result is its page count (each page's result is on its row). A request of one
    page for anything else ends as that page did: succeeded with the page's result and
    artefact, or failed with the code its content failed with (not retried: it would fail
    the same way again).
    """
    if kind == DECK_KIND:
        pages = (
            await conn.execute(select(func.count()).where(P.c.request_id == attempt.request_id))
        ).scalar_one()
        return {"status": RequestStatus.SUCCEEDED.value, "result": {"pages": int(pages)}}
    if failed:
        return {"status": RequestStatus.FAILED.value, "result": None, "artifact_key": None}
    return {
        "status": RequestStatus.SUCCEEDED.value,
        "result": None if result is None else {"request_id": attempt.request_id, **result},
        "artifact_key": artifact_key,
    }
