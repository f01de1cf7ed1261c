"""Webhooks: a workspace's endpoints, the deliveries of each event to each endpoint (written
with the event, the outbox), and every HTTP attempt of a delivery.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, JSONPayload, UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "workspace_id",
            sa.String(64),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("description", sa.String(200)),
        sa.Column("events", JSONPayload, nullable=False),
        sa.Column("secret", sa.String(100), nullable=False),
        sa.Column("previous_secret", sa.String(100)),
        sa.Column("previous_secret_expires_at", UTCDateTime),
        sa.Column("secret_rotated_at", UTCDateTime),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("events_since", UTCDateTime, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_webhook_endpoints_workspace", "webhook_endpoints", ["workspace_id", "id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "endpoint_id",
            BigId,
            sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("workspace_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(200), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("event_at", UTCDateTime, nullable=False),
        sa.Column("payload", JSONPayload, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_status_code", sa.Integer),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("delivered_at", UTCDateTime),
        sa.UniqueConstraint(
            "endpoint_id", "event_id", name="uq_webhook_deliveries_endpoint_id_event_id"
        ),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_webhook_deliveries_endpoint", "webhook_deliveries", ["endpoint_id", "id"])
    op.create_index(
        "ix_webhook_deliveries_type_at", "webhook_deliveries", ["event_type", "event_at"]
    )
    op.create_index("ix_webhook_deliveries_created", "webhook_deliveries", ["created_at"])
    op.create_table(
        "webhook_attempts",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "delivery_id",
            BigId,
            sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("job_id", BigId),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("error", sa.Text),
    )
    op.create_index("ix_webhook_attempts_delivery", "webhook_attempts", ["delivery_id", "number"])


def downgrade() -> None:
    op.drop_index("ix_webhook_attempts_delivery", table_name="webhook_attempts")
    op.drop_table("webhook_attempts")
    op.drop_index("ix_webhook_deliveries_created", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_type_at", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_endpoint", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhook_endpoints_workspace", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
