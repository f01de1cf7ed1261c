"""Jobs and tasks record their actor; asset bytes are stored once by content hash; retention
indexes on render requests and tasks.

`asset_blobs` holds each distinct asset content once (keyed by its SHA-256); `deck_assets` keeps
path, type, size and hash, and refers to its blob by hash. The upgrade moves the bytes over;
the downgrade copies them back.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("actor_token_id", BigId))
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("actor_token_id", BigId))
    op.create_index("ix_tasks_finished", "tasks", ["finished_at"])
    op.create_index("ix_render_requests_finished", "render_requests", ["finished_at"])
    op.create_table(
        "asset_blobs",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("stored_at", UTCDateTime, nullable=False),
    )
    conn = op.get_bind()
    blobs = sa.table(
        "asset_blobs",
        sa.column("sha256", sa.String),
        sa.column("size", sa.Integer),
        sa.column("data", sa.LargeBinary),
        sa.column("stored_at", UTCDateTime),
    )
    assets = sa.table(
        "deck_assets", sa.column("sha256", sa.String), sa.column("data", sa.LargeBinary)
    )
    now = datetime.now(UTC)
    seen: set[str] = set()
    for row in conn.execute(sa.select(assets.c.sha256, assets.c.data)):
        if row.sha256 in seen:
            continue
        seen.add(row.sha256)
        conn.execute(
            blobs.insert().values(
                sha256=row.sha256, size=len(row.data), data=row.data, stored_at=now
            )
        )
    with op.batch_alter_table("deck_assets") as batch:
        batch.drop_column("data")
    op.create_index("ix_deck_assets_sha256", "deck_assets", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_deck_assets_sha256", table_name="deck_assets")
    with op.batch_alter_table("deck_assets") as batch:
        batch.add_column(sa.Column("data", sa.LargeBinary))
    conn = op.get_bind()
    conn.execute(
        sa.text(
            "UPDATE deck_assets SET data = "
            "(SELECT b.data FROM asset_blobs b WHERE b.sha256 = deck_assets.sha256)"
        )
    )
    with op.batch_alter_table("deck_assets") as batch:
        batch.alter_column("data", existing_type=sa.LargeBinary, nullable=False)
    op.drop_table("asset_blobs")
    op.drop_index("ix_render_requests_finished", table_name="render_requests")
    op.drop_index("ix_tasks_finished", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("actor_token_id")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("actor_token_id")
