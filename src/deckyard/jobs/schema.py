"""The `jobs` and `job_events` tables."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, String, Table, Text

from deckyard.db import JSONPayload, UTCDateTime, metadata, partial_index
from deckyard.db.types import BigId
from deckyard.jobs.status import ACTIVE_PREDICATE, TERMINAL, Lifecycle, status_in

jobs = Table(
    "jobs",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("queue", String(64), nullable=False),
    Column("kind", String(128), nullable=False),
    Column("payload", JSONPayload, nullable=False),
    Column("status", String(16), nullable=False),
    Column("priority", Integer, nullable=False, default=0),
    Column("run_at", UTCDateTime, nullable=False),
    Column("attempt", Integer, nullable=False, default=0),
    Column("max_attempts", Integer, nullable=False),
    Column("lease_owner", String(128)),
    Column("lease_expires_at", UTCDateTime),
    Column("dedupe_key", String(256)),
    Column("workspace_id", String(64)),
    Column("parent_id", BigId, ForeignKey("jobs.id", ondelete="SET NULL")),
    Column("deadline_at", UTCDateTime),
    Column("cancel_requested_at", UTCDateTime),
    Column("result", JSONPayload),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime),
    Column("finished_at", UTCDateTime),
    Column("actor_token_id", BigId),
    partial_index(
        "ix_jobs_claim", "queue", "priority", "run_at", "id", where=status_in([Lifecycle.PENDING])
    ),
    partial_index("ix_jobs_lease", "lease_expires_at", where=status_in([Lifecycle.RUNNING])),
    partial_index(
        "uq_jobs_active_dedupe",
        "queue",
        "dedupe_key",
        where=f"dedupe_key IS NOT NULL AND {ACTIVE_PREDICATE}",
        unique=True,
    ),
    Index("ix_jobs_status_finished", "status", "finished_at"),
    # Pruning's oldest-ended-first read (migration 0015).
    partial_index("ix_jobs_finished_terminal", "finished_at", where=status_in(TERMINAL)),
    Index("ix_jobs_workspace_created", "workspace_id", "created_at"),
    Index("ix_jobs_parent", "parent_id"),
)

job_events = Table(
    "job_events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", BigId, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("type", String(64), nullable=False),
    Column("data", JSONPayload),
    Index("ix_job_events_job", "job_id", "id"),
)

periodic_ticks = Table(
    "job_periodic",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("last_tick_at", UTCDateTime, nullable=False),
)
"""The last cron tick enqueued per periodic job: a compare-and-set makes each tick run once."""

JOB_COLUMNS = tuple(jobs.c)
"""Every `jobs` column, in the order `Job.from_row` reads them."""
EVENT_COLUMNS = tuple(job_events.c)
"""Every `job_events` column, in the order `JobEvent.from_row` reads them."""
