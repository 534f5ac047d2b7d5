"""How many copy tasks a batch's latest copy job ran (``airmirror_batches.copy_tasks``), so that a retried job
fences the attempts of the one before it.  A batch still ``RUNNING`` when this migration runs was begun by an
earlier airmirror, whose copy tasks had one transactional id per partition: it gets
``PER_PARTITION_COPY_TASKS`` (0), so its retry fences those ids.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TABLE = "airmirror_batches"
PER_PARTITION_COPY_TASKS = 0  # airmirror.store.batches.PER_PARTITION_COPY_TASKS; migrations never import the model


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("copy_tasks", sa.Integer(), nullable=True))
    op.execute(sa.text(f"UPDATE {TABLE} SET copy_tasks = {PER_PARTITION_COPY_TASKS} WHERE state = 'RUNNING'"))


def downgrade() -> None:
    # a plain ALTER TABLE (SQLite 3.35 and later have it): recreating the table would break the foreign keys
    # of the batch ranges that reference it
    op.execute(sa.text(f"ALTER TABLE {TABLE} DROP COLUMN copy_tasks"))
