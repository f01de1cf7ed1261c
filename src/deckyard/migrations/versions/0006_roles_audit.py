"""Token roles admin/editor/viewer (member tokens become admin) and the audit log of writes.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE api_tokens SET role = 'admin' WHERE role = 'member'")
    with op.batch_alter_table("api_tokens") as batch:
        batch.alter_column(
            "role", existing_type=sa.String(16), nullable=False, server_default="admin"
        )
    op.create_table(
        "audit_events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("workspace_id", sa.String(64), nullable=False),
        sa.Column("token_id", BigId, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("method", sa.String(10), nullable=False),
        sa.Column("path", sa.String(1000), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("location", sa.String(1000)),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_audit_events_workspace", "audit_events", ["workspace_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_workspace", table_name="audit_events")
    op.drop_table("audit_events")
    with op.batch_alter_table("api_tokens") as batch:
        batch.alter_column(
            "role", existing_type=sa.String(16), nullable=False, server_default="member"
        )
    op.execute("UPDATE api_tokens SET role = 'member' WHERE role IN ('admin', 'editor', 'viewer')")
