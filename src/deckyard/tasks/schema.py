"""The `tasks` and `task_events` tables."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, String, Table, Text

from deckyard.db import JSONPayload, UTCDateTime, metadata
from deckyard.db.types import BigId

tasks = Table(
    "tasks",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("stage", Integer, nullable=False, default=0),
    Column("workspace_id", String(64)),
    Column("params", JSONPayload, nullable=False),
    Column("state", JSONPayload, nullable=False),
    Column("result", JSONPayload),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("owner", String(128)),
    Column("lease_expires_at", UTCDateTime),
    Column("actor_token_id", BigId),
    Index("ix_tasks_status", "status"),
    Index("ix_tasks_finished", "finished_at"),
    Index("ix_tasks_workspace_created", "workspace_id", "created_at"),
)

task_events = Table(
    "task_events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("task_id", BigId, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("type", String(64), nullable=False),
    Column("data", JSONPayload),
    Index("ix_task_events_task_created", "task_id", "created_at"),
)
