"""Foundation: the scheduler lock row, workspaces, API tokens, idempotency keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, JSONPayload, UTCDateTime, insert_rows

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    lock = op.create_table(
        "scheduler_lock",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
    )
    assert lock is not None
    insert_rows(lock, [{"id": 1, "name": "admission"}])
    op.create_table(
        "workspaces",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "workspace_id",
            sa.String(64),
            sa.ForeignKey(
                "workspaces.id", name="fk_api_tokens_workspace_id_workspaces", ondelete="CASCADE"
            ),
            nullable=False,
        ),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("label", sa.String(200)),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("revoked_at", UTCDateTime),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("workspace_id", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("response_headers", JSONPayload),
        sa.Column("response_body", sa.LargeBinary),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_idempotency_keys_created", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("api_tokens")
    op.drop_table("workspaces")
    op.drop_table("scheduler_lock")
