"""Tasks carry their driver's lease (`owner`, `lease_expires_at`), so a dead driver's task resumes.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("owner", sa.String(128)))
        batch.add_column(sa.Column("lease_expires_at", UTCDateTime))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
