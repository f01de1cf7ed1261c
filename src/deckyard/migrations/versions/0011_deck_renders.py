"""A deck in one render request: `render_pages` (one row per page) and multi-slot attempts.

A deck request's attempt may hold more than one slot of its renderer
(`render_attempts.extra_slots`, a JSON list next to `slot`), so its pages render in parallel;
each page's result is committed on its own `render_pages` row by a compare-and-set.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, JSONPayload, UTCDateTime, create_partial_index

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("render_attempts") as batch:
        batch.add_column(sa.Column("extra_slots", JSONPayload))
    op.create_table(
        "render_pages",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "request_id",
            BigId,
            sa.ForeignKey("render_requests.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("page_index", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempt_id", BigId),
        sa.Column("result", JSONPayload),
        sa.Column("artifact_key", sa.String(500)),
        sa.Column("error_code", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.Column("committed_at", UTCDateTime),
        sa.UniqueConstraint("request_id", "page_index", name="uq_render_pages_request_page"),
    )
    create_partial_index(
        "ix_render_pages_pending", "render_pages", ["request_id"], "status = 'pending'"
    )


def downgrade() -> None:
    op.drop_table("render_pages")
    with op.batch_alter_table("render_attempts") as batch:
        batch.drop_column("extra_slots")
