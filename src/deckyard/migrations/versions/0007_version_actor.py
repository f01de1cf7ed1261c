"""Page versions record the token (actor) whose edit wrote them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("page_versions") as batch:
        batch.add_column(sa.Column("actor_token_id", BigId))


def downgrade() -> None:
    with op.batch_alter_table("page_versions") as batch:
        batch.drop_column("actor_token_id")
