"""Renderers drain: `render_workers.draining_since`, when a drain of the renderer began.

While it is set, no node admits new attempts to that renderer (every node reads the row at
admission), its in-flight attempts finish, and what it hands back is retried elsewhere without
counting against the request's attempts. The renderer's replacement (a new epoch under the same
name) clears it. The `state` column, a free string, gains the values `draining` and `drained`.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("render_workers") as batch:
        batch.add_column(sa.Column("draining_since", UTCDateTime))


def downgrade() -> None:
    op.execute(
        sa.text("UPDATE render_workers SET state = 'down' WHERE state IN ('draining', 'drained')")
    )
    # `ALTER TABLE ... DROP COLUMN` on both (SQLite 3.35+): rebuilding the table, as batch mode
    # would on SQLite, drops a table that `render_attempts` rows refer to.
    with op.batch_alter_table("render_workers", recreate="never") as batch:
        batch.drop_column("draining_since")
