"""The holes of an exact offset-sync run: source offsets inside it that hold no copy (records a transform dropped,
compaction holes, markers), packed, so a chunk that drops records is one run instead of one per drop.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("airmirror_offset_syncs") as table:
        table.add_column(sa.Column("holes", sa.LargeBinary()))


def downgrade() -> None:
    with op.batch_alter_table("airmirror_offset_syncs") as table:
        table.drop_column("holes")
