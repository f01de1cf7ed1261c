"""Hosted sites: publications (a verified site's files in the store), the live pointer per deck,
share links for private sites, and the key share links are signed with.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

from deckyard.migrations.helpers import BigId, JSONPayload, UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "publications",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("deck_id", BigId, sa.ForeignKey("decks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("workspace_id", sa.String(64), nullable=False),
        sa.Column("task_id", BigId, unique=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("visibility", sa.String(16), nullable=False),
        sa.Column("deck_version", sa.Integer, nullable=False),
        sa.Column("site_version", sa.String(100), nullable=False),
        sa.Column("site_key", sa.String(500), nullable=False),
        sa.Column("site_sha256", sa.String(64), nullable=False),
        sa.Column("store_prefix", sa.String(500), nullable=False),
        sa.Column("files", JSONPayload, nullable=False),
        sa.Column("actor_token_id", BigId),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("live_at", UTCDateTime),
        sa.Column("ended_at", UTCDateTime),
        sa.Column("files_deleted_at", UTCDateTime),
    )
    op.create_index("ix_publications_deck", "publications", ["deck_id", "id"])
    op.create_index("ix_publications_status", "publications", ["status", "ended_at"])
    op.create_table(
        "deck_sites",
        sa.Column(
            "deck_id", BigId, sa.ForeignKey("decks.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("workspace_id", sa.String(64), nullable=False),
        sa.Column("publication_id", BigId),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_table(
        "share_links",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("deck_id", BigId, sa.ForeignKey("decks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("workspace_id", sa.String(64), nullable=False),
        sa.Column("label", sa.String(200)),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("created_by_token_id", BigId),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("revoked_at", UTCDateTime),
    )
    op.create_index("ix_share_links_deck", "share_links", ["deck_id", "id"])
    site_keys = op.create_table(
        "site_keys",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(128), nullable=False),
    )
    op.bulk_insert(site_keys, [{"id": 1, "key": secrets.token_hex(32)}])


def downgrade() -> None:
    op.drop_table("site_keys")
    op.drop_index("ix_share_links_deck", table_name="share_links")
    op.drop_table("share_links")
    op.drop_table("deck_sites")
    op.drop_index("ix_publications_status", table_name="publications")
    op.drop_index("ix_publications_deck", table_name="publications")
    op.drop_table("publications")
