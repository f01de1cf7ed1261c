"""Decks, their assets, pages and page versions."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from deckyard.db import JSONPayload, UTCDateTime, metadata
from deckyard.db.types import BigId

decks = Table(
    "decks",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "workspace_id", String(64), ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
    ),
    Column("title", String(300), nullable=False),
    Column("manifest", JSONPayload, nullable=False),
    Column("theme_css", Text, nullable=False),
    Column("theme_path", String(500)),
    Column("version", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_decks_workspace", "workspace_id", "id"),
)

deck_assets = Table(
    "deck_assets",
    metadata,
    Column("deck_id", BigId, ForeignKey("decks.id", ondelete="CASCADE"), primary_key=True),
    Column("path", String(500), primary_key=True),
    Column("media_type", String(200), nullable=False),
    Column("size", Integer, nullable=False),
    Column("sha256", String(64), nullable=False),
    Index("ix_deck_assets_sha256", "sha256"),
)
"""A deck's assets by path; the bytes are the `asset_blobs` row of the same `sha256`."""

asset_blobs = Table(
    "asset_blobs",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("stored_at", UTCDateTime, nullable=False),
)
"""Each distinct asset content once; `stored_at` is bumped by every upload of the same bytes,
so the sweep (which removes blobs no asset refers to) never takes one an upload is using."""

pages = Table(
    "pages",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("deck_id", BigId, ForeignKey("decks.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(100), nullable=False),
    Column("position", Integer, nullable=False),
    Column("current_version_id", BigId),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("deck_id", "name", name="uq_pages_deck_id_name"),
)

page_versions = Table(
    "page_versions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("page_id", BigId, ForeignKey("pages.id", ondelete="CASCADE"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("kind", String(8), nullable=False),
    Column("source", Text, nullable=False),
    Column("compiled", Text),
    Column("compiled_sha256", String(64)),
    Column("validation", JSONPayload),
    Column("skipped_visual_verification", Boolean, nullable=False),
    Column("screenshot", JSONPayload),
    Column("actor_token_id", BigId),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("page_id", "number", name="uq_page_versions_page_id_number"),
    sqlite_autoincrement=True,
)
"""Every version of every page; an id is never handed out twice, even after its page was
deleted (`AUTOINCREMENT` on SQLite, a sequence on PostgreSQL): jobs and links name versions by
id."""

publications = Table(
    "publications",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("deck_id", BigId, ForeignKey("decks.id", ondelete="CASCADE"), nullable=False),
    Column("workspace_id", String(64), nullable=False),
    Column("task_id", BigId, unique=True),
    Column("status", String(16), nullable=False),
    Column("visibility", String(16), nullable=False),
    Column("deck_version", Integer, nullable=False),
    Column("site_version", String(100), nullable=False),
    Column("site_key", String(500), nullable=False),
    Column("site_sha256", String(64), nullable=False),
    Column("store_prefix", String(500), nullable=False),
    Column("files", JSONPayload, nullable=False),
    Column("actor_token_id", BigId),
    Column("created_at", UTCDateTime, nullable=False),
    Column("live_at", UTCDateTime),
    Column("ended_at", UTCDateTime),
    Column("files_deleted_at", UTCDateTime),
    Index("ix_publications_deck", "deck_id", "id"),
    Index("ix_publications_status", "status", "ended_at"),
)

deck_sites = Table(
    "deck_sites",
    metadata,
    Column("deck_id", BigId, ForeignKey("decks.id", ondelete="CASCADE"), primary_key=True),
    Column("workspace_id", String(64), nullable=False),
    Column("publication_id", BigId),
    Column("updated_at", UTCDateTime, nullable=False),
)

share_links = Table(
    "share_links",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("deck_id", BigId, ForeignKey("decks.id", ondelete="CASCADE"), nullable=False),
    Column("workspace_id", String(64), nullable=False),
    Column("label", String(200)),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("created_by_token_id", BigId),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
    Index("ix_share_links_deck", "deck_id", "id"),
)

site_keys = Table(
    "site_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String(128), nullable=False),
)
