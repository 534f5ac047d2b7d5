"""Schema registries: the source-to-target schema id map and the subjects synced of each flow, and the records
copied unchanged because their schema id was unknown (``airmirror.schema.unknown = pass``), per partition and per
batch range.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "airmirror_schema_ids",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("source_id", sa.BigInteger(), nullable=False),
        sa.Column("target_id", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("flow", "source_id", name="pk_airmirror_schema_ids"),
    )
    op.create_table(
        "airmirror_schema_subjects",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("subject", sa.String(512), nullable=False),
        sa.Column("target_subject", sa.String(512), nullable=False),
        sa.Column("versions", sa.Integer(), nullable=False),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("flow", "subject", name="pk_airmirror_schema_subjects"),
    )
    with op.batch_alter_table("airmirror_partition_totals") as table:
        table.add_column(sa.Column("schema_passed", sa.BigInteger(), nullable=False, server_default="0"))
    with op.batch_alter_table("airmirror_batch_ranges") as table:
        table.add_column(sa.Column("schema_passed", sa.BigInteger()))


def downgrade() -> None:
    with op.batch_alter_table("airmirror_batch_ranges") as table:
        table.drop_column("schema_passed")
    with op.batch_alter_table("airmirror_partition_totals") as table:
        table.drop_column("schema_passed")
    op.drop_table("airmirror_schema_subjects")
    op.drop_table("airmirror_schema_ids")
