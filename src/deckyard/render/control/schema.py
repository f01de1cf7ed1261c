"""The `renderers`, `render_requests`, `render_attempts` and `render_pages` tables."""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from deckyard.db import JSONPayload, UTCDateTime, metadata, partial_index
from deckyard.db.types import BigId
from deckyard.jobs.status import ACTIVE_PREDICATE, Lifecycle, status_in

OCCUPIED_PREDICATE = "active_occupancy = 1"

renderers = Table(
    "renderers",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("url", String(500), nullable=False),
    Column("renderer_id", String(200)),
    Column("epoch", String(64)),
    Column("slots", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("draining_since", UTCDateTime),
)
"""Renderers the control plane dispatches to; a row changes only when the renderer did.

`renderer_id` is the identity the renderer reports about itself, not a row id.
`draining_since` is set while the renderer's current epoch drains (no new admissions on any
node); a new epoch under the same name clears it."""

render_requests = Table(
    "render_requests",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),
    Column("workspace_id", String(64), nullable=False),
    Column("input", JSONPayload, nullable=False),
    Column("input_hash", String(64), nullable=False),
    Column("dedupe_key", String(256)),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("deadline_at", UTCDateTime, nullable=False),
    Column("retry_after", UTCDateTime, nullable=False),
    Column("cancel_requested_at", UTCDateTime),
    Column("result", JSONPayload),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("artifact_key", String(500)),
    Column("parent_job_id", BigId),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    partial_index(
        "ix_render_requests_due", "retry_after", "id", where=status_in([Lifecycle.PENDING])
    ),
    partial_index(
        "uq_render_requests_active_dedupe",
        "dedupe_key",
        where=f"dedupe_key IS NOT NULL AND {ACTIVE_PREDICATE}",
        unique=True,
    ),
    Index("ix_render_requests_parent_job", "parent_job_id"),
    Index("ix_render_requests_workspace_status", "workspace_id", "status"),
    Index("ix_render_requests_finished", "finished_at"),
)
"""What should be rendered, for whom, until when; the one unit of render work."""

render_attempts = Table(
    "render_attempts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "request_id", BigId, ForeignKey("render_requests.id", ondelete="CASCADE"), nullable=False
    ),
    Column("attempt_key", String(128), nullable=False, unique=True),
    Column("workspace_id", String(64), nullable=False),
    Column("renderer_id", BigId, ForeignKey("renderers.id"), nullable=False),
    Column("renderer_epoch", String(64), nullable=False),
    Column("slot", Integer, nullable=False),
    Column("active_occupancy", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("timeout_seconds", Float, nullable=False),
    Column("lease_expires_at", UTCDateTime, nullable=False),
    Column("last_receipt_at", UTCDateTime),
    Column("last_receipt_status", String(16)),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("extra_slots", JSONPayload),
    partial_index(
        "uq_render_attempts_slot",
        "renderer_id",
        "renderer_epoch",
        "slot",
        where=OCCUPIED_PREDICATE,
        unique=True,
    ),
    partial_index("ix_render_attempts_lease", "lease_expires_at", where=OCCUPIED_PREDICATE),
    Index("ix_render_attempts_request", "request_id"),
)
"""One try of a request on one renderer slot; `active_occupancy = 1` while it holds the slot.

The slot is one of the renderer `renderer_id` (a `renderers.id`) in its epoch `renderer_epoch`.

A deck attempt may hold more slots of the same renderer, listed in `extra_slots`: the unique
index guards `slot` only, the others are guarded by admission deciding under its lock.
"""

render_pages = Table(
    "render_pages",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "request_id", BigId, ForeignKey("render_requests.id", ondelete="CASCADE"), nullable=False
    ),
    Column("page_index", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempt_id", BigId),
    Column("result", JSONPayload),
    Column("artifact_key", String(500)),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("committed_at", UTCDateTime),
    UniqueConstraint("request_id", "page_index", name="uq_render_pages_request_page"),
    partial_index("ix_render_pages_pending", "request_id", where="status = 'pending'"),
)
"""One page of a deck request: `pending` until an attempt's result for it is committed."""
