"""Workspace settings: `workspaces.settings`, a JSON object of the workspace's own settings.

Null (every workspace before this revision) is no setting at all: each one follows the server's.
The only key so far is `fetch_remote` (`deckyard.api.workspace_settings`).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import JSONPayload

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workspaces") as batch:
        batch.add_column(sa.Column("settings", JSONPayload))


def downgrade() -> None:
    # `ALTER TABLE ... DROP COLUMN` on both (SQLite 3.35+): rebuilding the table, as batch mode
    # would on SQLite, drops a table that `api_tokens` rows refer to.
    with op.batch_alter_table("workspaces", recreate="never") as batch:
        batch.drop_column("settings")
