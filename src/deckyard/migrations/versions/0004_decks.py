"""Decks: decks, deck_assets, pages, page_versions.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, JSONPayload, UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "decks",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "workspace_id",
            sa.String(64),
            sa.ForeignKey(
                "workspaces.id", name="fk_decks_workspace_id_workspaces", ondelete="CASCADE"
            ),
            nullable=False,
        ),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("manifest", JSONPayload, nullable=False),
        sa.Column("theme_css", sa.Text, nullable=False),
        sa.Column("theme_path", sa.String(500)),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_decks_workspace", "decks", ["workspace_id", "id"])
    op.create_table(
        "deck_assets",
        sa.Column(
            "deck_id",
            BigId,
            sa.ForeignKey("decks.id", name="fk_deck_assets_deck_id_decks", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("path", sa.String(500), primary_key=True),
        sa.Column("media_type", sa.String(200), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "pages",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "deck_id",
            BigId,
            sa.ForeignKey("decks.id", name="fk_pages_deck_id_decks", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("current_version_id", BigId),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("deck_id", "name", name="uq_pages_deck_id_name"),
    )
    op.create_table(
        "page_versions",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "page_id",
            BigId,
            sa.ForeignKey("pages.id", name="fk_page_versions_page_id_pages", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("compiled", sa.Text),
        sa.Column("compiled_sha256", sa.String(64)),
        sa.Column("validation", JSONPayload),
        sa.Column("skipped_visual_verification", sa.Boolean, nullable=False),
        sa.Column("screenshot", JSONPayload),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("page_id", "number", name="uq_page_versions_page_id_number"),
    )


def downgrade() -> None:
    op.drop_table("page_versions")
    op.drop_table("pages")
    op.drop_table("deck_assets")
    op.drop_table("decks")
