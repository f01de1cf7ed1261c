"""Renderers are `renderers`: the table `render_workers` and its attempts' columns renamed.

"Worker" means only the job worker. The renderers' table becomes `renderers`, and an attempt's
renderer columns `render_attempts.worker_id` / `worker_epoch` become `renderer_id` /
`renderer_epoch`. Constraints named after the old names are renamed with them on PostgreSQL
(and the `id` sequence); a SQLite database keeps their old names in its tables' text
(`helpers.rename_constraint`). Nothing is rebuilt: on SQLite `ALTER TABLE ... RENAME` rewrites
the foreign key of `render_attempts` to the new table name and `RENAME COLUMN` the slot index.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-10
"""

from __future__ import annotations

from alembic import op

from deckyard.migrations.helpers import rename_constraint, rename_id_sequence

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

OLD_FK = "fk_render_attempts_worker_id_render_workers"
NEW_FK = "fk_render_attempts_renderer_id_renderers"


def upgrade() -> None:
    op.rename_table("render_workers", "renderers")
    rename_id_sequence("render_workers", "renderers")
    rename_constraint("renderers", "pk_render_workers", "pk_renderers")
    rename_constraint("renderers", "uq_render_workers_name", "uq_renderers_name")
    with op.batch_alter_table("render_attempts", recreate="never") as batch:
        batch.alter_column("worker_id", new_column_name="renderer_id")
        batch.alter_column("worker_epoch", new_column_name="renderer_epoch")
    rename_constraint("render_attempts", OLD_FK, NEW_FK)


def downgrade() -> None:
    rename_constraint("render_attempts", NEW_FK, OLD_FK)
    with op.batch_alter_table("render_attempts", recreate="never") as batch:
        batch.alter_column("renderer_id", new_column_name="worker_id")
        batch.alter_column("renderer_epoch", new_column_name="worker_epoch")
    rename_constraint("renderers", "uq_renderers_name", "uq_render_workers_name")
    rename_constraint("renderers", "pk_renderers", "pk_render_workers")
    rename_id_sequence("renderers", "render_workers")
    op.rename_table("renderers", "render_workers")
