"""Partition prunes: when each source partition's offset-sync runs were last pruned and folded, so that retention
runs once per interval per partition whichever process commits the flow's batches (each Airflow task and each
CLI run is a process of its own).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "airmirror_partition_prunes",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("pruned_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", name="pk_airmirror_partition_prunes"),
    )


def downgrade() -> None:
    op.drop_table("airmirror_partition_prunes")
