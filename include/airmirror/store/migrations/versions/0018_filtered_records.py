"""Records a flow's transforms dropped (``Filter``) and records ``errors.tolerance = all`` skipped: counted per batch
range and per partition; and the records dropped per partition of a verification, which compares the target with the
transformed source.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("airmirror_partition_totals") as table:
        table.add_column(sa.Column("filtered", sa.BigInteger(), nullable=False, server_default="0"))
        table.add_column(sa.Column("skipped", sa.BigInteger(), nullable=False, server_default="0"))
    with op.batch_alter_table("airmirror_batch_ranges") as table:
        table.add_column(sa.Column("filtered", sa.BigInteger()))
        table.add_column(sa.Column("skipped", sa.BigInteger()))
    with op.batch_alter_table("airmirror_verified_partitions") as table:
        table.add_column(sa.Column("filtered", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("airmirror_verified_partitions") as table:
        table.drop_column("filtered")
    with op.batch_alter_table("airmirror_batch_ranges") as table:
        table.drop_column("skipped")
        table.drop_column("filtered")
    with op.batch_alter_table("airmirror_partition_totals") as table:
        table.drop_column("skipped")
        table.drop_column("filtered")
