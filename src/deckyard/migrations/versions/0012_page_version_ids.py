"""Page version ids are never handed out twice (SQLite `AUTOINCREMENT` on `page_versions`).

A version's id names it in screenshot jobs (their dedupe key), job results and the API; on
SQLite, deleting a page freed its versions' ids for the next version written, so an old id
could name a different page's version. PostgreSQL's sequences never reuse a number. An id
freed by a delete before this upgrade, above the largest id left, can still come back once.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from __future__ import annotations

from deckyard.migrations.helpers import set_sqlite_autoincrement

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    set_sqlite_autoincrement("page_versions")


def downgrade() -> None:
    set_sqlite_autoincrement("page_versions", enabled=False)
