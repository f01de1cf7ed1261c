"""Screenshot jobs are retired: a screenshot is a render request (`/v1/renders/{id}`).

No handler runs the `screenshot` job kind any more, so a screenshot job still queued or running
when the node is upgraded would wait forever. It ends here, failed with `JOB_KIND_RETIRED` and a
message that says what to do; the render request it opened, if any, is left to end by itself
(its deadline bounds it) and to retention. Nothing to undo on downgrade: the jobs stay failed.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from deckyard.db.types import UTCDateTime

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

MESSAGE = (
    "screenshot jobs were replaced by render requests in this version; submit the "
    "screenshot again (POST /v1/screenshots answers with /v1/renders/{id})"
)


def upgrade() -> None:
    jobs = sa.table(
        "jobs",
        sa.column("kind", sa.String),
        sa.column("status", sa.String),
        sa.column("error_code", sa.String),
        sa.column("error_message", sa.Text),
        sa.column("lease_owner", sa.String),
        sa.column("lease_expires_at", UTCDateTime),
        sa.column("updated_at", UTCDateTime),
        sa.column("finished_at", UTCDateTime),
    )
    now = datetime.now(UTC)
    op.execute(
        jobs.update()
        .where(jobs.c.kind == "screenshot", jobs.c.status.in_(["pending", "running"]))
        .values(
            status="failed",
            error_code="JOB_KIND_RETIRED",
            error_message=MESSAGE,
            lease_owner=None,
            lease_expires_at=None,
            updated_at=now,
            finished_at=now,
        )
    )


def downgrade() -> None:
    pass
