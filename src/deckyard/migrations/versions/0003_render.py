"""The render control plane: render_workers, render_requests, render_attempts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, JSONPayload, UTCDateTime, create_partial_index

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

OCCUPIED = "active_occupancy = 1"


def upgrade() -> None:
    op.create_table(
        "render_workers",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("url", sa.String(500), nullable=False),
        sa.Column("renderer_id", sa.String(200)),
        sa.Column("epoch", sa.String(64)),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("name", name="uq_render_workers_name"),
    )
    op.create_table(
        "render_requests",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("workspace_id", sa.String(64), nullable=False),
        sa.Column("input", JSONPayload, nullable=False),
        sa.Column("input_hash", sa.String(64), nullable=False),
        sa.Column("dedupe_key", sa.String(256)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("deadline_at", UTCDateTime, nullable=False),
        sa.Column("retry_after", UTCDateTime, nullable=False),
        sa.Column("cancel_requested_at", UTCDateTime),
        sa.Column("result", JSONPayload),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.Column("artifact_key", sa.String(500)),
        sa.Column("parent_job_id", BigId),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime),
    )
    create_partial_index(
        "ix_render_requests_due", "render_requests", ["retry_after", "id"], "status = 'pending'"
    )
    create_partial_index(
        "uq_render_requests_active_dedupe",
        "render_requests",
        ["dedupe_key"],
        "dedupe_key IS NOT NULL AND status IN ('pending', 'running')",
        unique=True,
    )
    op.create_index("ix_render_requests_parent_job", "render_requests", ["parent_job_id"])
    op.create_index(
        "ix_render_requests_workspace_status", "render_requests", ["workspace_id", "status"]
    )
    op.create_table(
        "render_attempts",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "request_id",
            BigId,
            sa.ForeignKey(
                "render_requests.id",
                name="fk_render_attempts_request_id_render_requests",
                ondelete="CASCADE",
            ),
            nullable=False,
        ),
        sa.Column("attempt_key", sa.String(128), nullable=False),
        sa.Column("workspace_id", sa.String(64), nullable=False),
        sa.Column(
            "worker_id",
            BigId,
            sa.ForeignKey("render_workers.id", name="fk_render_attempts_worker_id_render_workers"),
            nullable=False,
        ),
        sa.Column("worker_epoch", sa.String(64), nullable=False),
        sa.Column("slot", sa.Integer, nullable=False),
        sa.Column("active_occupancy", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("timeout_seconds", sa.Float, nullable=False),
        sa.Column("lease_expires_at", UTCDateTime, nullable=False),
        sa.Column("last_receipt_at", UTCDateTime),
        sa.Column("last_receipt_status", sa.String(16)),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime),
        sa.UniqueConstraint("attempt_key", name="uq_render_attempts_attempt_key"),
    )
    create_partial_index(
        "uq_render_attempts_slot",
        "render_attempts",
        ["worker_id", "worker_epoch", "slot"],
        OCCUPIED,
        unique=True,
    )
    create_partial_index(
        "ix_render_attempts_lease", "render_attempts", ["lease_expires_at"], OCCUPIED
    )
    op.create_index("ix_render_attempts_request", "render_attempts", ["request_id"])


def downgrade() -> None:
    op.drop_table("render_attempts")
    op.drop_table("render_requests")
    op.drop_table("render_workers")
