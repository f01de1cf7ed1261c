"""Foundation: the singleton scheduler lock row.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import insert_rows

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


def downgrade() -> None:
    op.drop_table("scheduler_lock")
