"""Metadata retention: totals per partition (filled from the committed ranges and gaps so far), offset-sync runs
whose batch was pruned (``batch_id`` NULL), and the indexes retention deletes by.

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
BACKFILL = """
INSERT INTO airmirror_partition_totals (flow, topic, partition, records, bytes, gap_count, gap_offsets)
SELECT flow, topic, partition, SUM(records), SUM(bytes), SUM(gap_count), SUM(gap_offsets) FROM (
    SELECT b.flow AS flow, r.topic AS topic, r.partition AS partition, COALESCE(r.records, 0) AS records,
           COALESCE(r.bytes, 0) AS bytes, 0 AS gap_count, 0 AS gap_offsets
    FROM airmirror_batch_ranges r JOIN airmirror_batches b ON b.id = r.batch_id
    WHERE b.state = 'COMMITTED'
    UNION ALL
    SELECT flow, topic, partition, 0, 0, 1, end_offset - start_offset FROM airmirror_gaps
) AS added
GROUP BY flow, topic, partition
"""


def upgrade() -> None:
    op.create_table(
        "airmirror_partition_totals",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("gap_count", sa.BigInteger(), nullable=False),
        sa.Column("gap_offsets", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", name="pk_airmirror_partition_totals"),
    )
    op.execute(sa.text(BACKFILL))
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
    op.drop_table("airmirror_partition_totals")
