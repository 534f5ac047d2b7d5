"""Folded offset-sync runs: ``downstream_end`` and ``records`` of a run that retention folded from several exact
runs (both ``NULL`` for an exact run; see :mod:`airmirror.store.retention`).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLE = "airmirror_offset_syncs"


def upgrade() -> None:
    with op.batch_alter_table(TABLE, recreate="auto") as batch:
        batch.add_column(sa.Column("downstream_end", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("records", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.execute(sa.text(f"DELETE FROM {TABLE} WHERE downstream_end IS NOT NULL"))
    with op.batch_alter_table(TABLE, recreate="auto") as batch:
        batch.drop_column("records")
        batch.drop_column("downstream_end")
