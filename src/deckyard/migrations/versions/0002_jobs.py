"""The durable job runtime and tasks: jobs, job_events, job_periodic, tasks, task_events.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, JSONPayload, UTCDateTime, create_partial_index

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ACTIVE = "status IN ('pending', 'running')"


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("queue", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("payload", JSONPayload, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("run_at", UTCDateTime, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_expires_at", UTCDateTime),
        sa.Column("dedupe_key", sa.String(256)),
        sa.Column("workspace_id", sa.String(64)),
        sa.Column(
            "parent_id",
            BigId,
            sa.ForeignKey("jobs.id", name="fk_jobs_parent_id_jobs", ondelete="SET NULL"),
        ),
        sa.Column("deadline_at", UTCDateTime),
        sa.Column("cancel_requested_at", UTCDateTime),
        sa.Column("result", JSONPayload),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("started_at", UTCDateTime),
        sa.Column("finished_at", UTCDateTime),
    )
    create_partial_index(
        "ix_jobs_claim", "jobs", ["queue", "priority", "run_at", "id"], "status = 'pending'"
    )
    create_partial_index("ix_jobs_lease", "jobs", ["lease_expires_at"], "status = 'running'")
    create_partial_index(
        "uq_jobs_active_dedupe",
        "jobs",
        ["queue", "dedupe_key"],
        f"dedupe_key IS NOT NULL AND {ACTIVE}",
        unique=True,
    )
    op.create_index("ix_jobs_status_finished", "jobs", ["status", "finished_at"])
    op.create_index("ix_jobs_workspace_created", "jobs", ["workspace_id", "created_at"])
    op.create_index("ix_jobs_parent", "jobs", ["parent_id"])
    op.create_table(
        "job_events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "job_id",
            BigId,
            sa.ForeignKey("jobs.id", name="fk_job_events_job_id_jobs", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("data", JSONPayload),
    )
    op.create_index("ix_job_events_job", "job_events", ["job_id", "id"])
    op.create_table(
        "job_periodic",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("last_tick_at", UTCDateTime, nullable=False),
    )

    op.create_table(
        "tasks",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stage", sa.Integer, nullable=False),
        sa.Column("workspace_id", sa.String(64)),
        sa.Column("params", JSONPayload, nullable=False),
        sa.Column("state", JSONPayload, nullable=False),
        sa.Column("result", JSONPayload),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime),
    )
    op.create_index("ix_tasks_status", "tasks", ["status"])
    op.create_index("ix_tasks_workspace_created", "tasks", ["workspace_id", "created_at"])
    op.create_table(
        "task_events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "task_id",
            BigId,
            sa.ForeignKey("tasks.id", name="fk_task_events_task_id_tasks", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("data", JSONPayload),
    )
    op.create_index("ix_task_events_task_created", "task_events", ["task_id", "created_at"])


def downgrade() -> None:
    op.drop_table("task_events")
    op.drop_table("tasks")
    op.drop_table("job_periodic")
    op.drop_table("job_events")
    op.drop_table("jobs")
