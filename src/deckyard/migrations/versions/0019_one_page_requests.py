"""Every render request has its pages: a single render is a request of one page.

A render's result is committed on its page row (`store_pages.page_commit`), a single picture's
as a deck page's, so every request that is not a deck's gets its one page row here: committed
with the request's result and artefact when the request succeeded, pending otherwise (a pending
or running request renders it; a failed or cancelled one that is retried renders it again).
Downgrading deletes those rows again.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from deckyard.db.types import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def _tables() -> tuple[sa.TableClause, sa.TableClause]:
    requests = sa.table(
        "render_requests",
        sa.column("id", sa.BigInteger),
        sa.column("kind", sa.String),
        sa.column("status", sa.String),
        sa.column("result", sa.JSON),
        sa.column("artifact_key", sa.String),
        sa.column("finished_at", UTCDateTime),
    )
    pages = sa.table(
        "render_pages",
        sa.column("request_id", sa.BigInteger),
        sa.column("page_index", sa.Integer),
        sa.column("status", sa.String),
        sa.column("result", sa.JSON),
        sa.column("artifact_key", sa.String),
        sa.column("committed_at", UTCDateTime),
    )
    return requests, pages


def upgrade() -> None:
    requests, pages = _tables()
    succeeded = requests.c.status == "succeeded"
    lacking = ~sa.exists().where(pages.c.request_id == requests.c.id)
    op.execute(
        pages.insert().from_select(
            ["request_id", "page_index", "status", "result", "artifact_key", "committed_at"],
            sa.select(
                requests.c.id,
                sa.literal(0),
                sa.case((succeeded, "committed"), else_="pending"),
                sa.case((succeeded, requests.c.result), else_=sa.null()),
                sa.case((succeeded, requests.c.artifact_key), else_=sa.null()),
                sa.case((succeeded, requests.c.finished_at), else_=sa.null()),
            ).where(requests.c.kind != "deck", lacking),
        )
    )


def downgrade() -> None:
    requests, pages = _tables()
    singles = sa.select(requests.c.id).where(requests.c.kind != "deck")
    op.execute(pages.delete().where(pages.c.request_id.in_(singles)))
