"""AI authoring: the model catalog and token roles (a worker token may only work queues).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ai_models",
        sa.Column("model_id", sa.String(200), primary_key=True),
        sa.Column("owned_by", sa.String(200)),
        sa.Column("created", sa.BigInteger),
        sa.Column("first_seen_at", UTCDateTime, nullable=False),
    )
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("role", sa.String(16), nullable=False, server_default="member"))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("role")
    op.drop_table("ai_models")
