"""Metadata retention: pruned totals per partition, offset-sync runs whose batch was pruned (``batch_id`` NULL),
and the indexes retention deletes by.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "airmirror_pruned_totals",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("gap_count", sa.BigInteger(), nullable=False),
        sa.Column("gap_offsets", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", name="pk_airmirror_pruned_totals"),
    )
    with op.batch_alter_table("airmirror_offset_syncs", recreate="auto") as batch:
        batch.alter_column("batch_id", existing_type=ID, nullable=True)
    op.create_index("ix_airmirror_offset_syncs_batch_id", "airmirror_offset_syncs", ["batch_id"])
    op.create_index("ix_airmirror_batches_flow_finished_at", "airmirror_batches", ["flow", "finished_at"])
    op.create_index("ix_airmirror_mm2_syncs_batch_id", "airmirror_mm2_syncs", ["batch_id"])


def downgrade() -> None:
    op.drop_index("ix_airmirror_mm2_syncs_batch_id", "airmirror_mm2_syncs")
    op.drop_index("ix_airmirror_batches_flow_finished_at", "airmirror_batches")
    op.drop_index("ix_airmirror_offset_syncs_batch_id", "airmirror_offset_syncs")
    op.execute(
        sa.text(
            "UPDATE airmirror_offset_syncs SET batch_id = (SELECT MAX(b.id) FROM airmirror_batches b "
            "WHERE b.flow = airmirror_offset_syncs.flow) WHERE batch_id IS NULL"
        )
    )
    with op.batch_alter_table("airmirror_offset_syncs", recreate="auto") as batch:
        batch.alter_column("batch_id", existing_type=ID, nullable=False)
    op.drop_table("airmirror_pruned_totals")
