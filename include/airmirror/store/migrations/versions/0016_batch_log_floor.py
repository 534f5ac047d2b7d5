"""A batch's log floor (``airmirror_batches.log_floor``): the batch log's high watermark before the batch's first copy
job, so that a lookup of the batch's progress scans the log from there instead of from its start.  Batches whose
first job ran before this migration keep ``NULL``: their lookups scan from the log start, as before.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLE = "airmirror_batches"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("log_floor", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    # a plain ALTER TABLE (SQLite 3.35 and later have it), as in 0012
    op.execute(sa.text(f"ALTER TABLE {TABLE} DROP COLUMN log_floor"))
