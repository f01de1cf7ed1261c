"""Pruning finds old jobs by an index: `ix_jobs_finished_terminal` on `finished_at` of ended jobs.

`jobs_prunable` asks for the oldest ended jobs (`status IN (succeeded, failed, cancelled) AND
finished_at < cutoff ORDER BY finished_at`). `ix_jobs_status_finished (status, finished_at)`
answers that only by merging three ranges and sorting; with 1,000,000 ended jobs each batch
read most of them (bench/queue_scale). The partial index is read in order and stops at the
batch size.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from deckyard.migrations.helpers import create_partial_index

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_partial_index(
        "ix_jobs_finished_terminal",
        "jobs",
        ["finished_at"],
        "status IN ('succeeded', 'failed', 'cancelled')",
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_finished_terminal", table_name="jobs")
