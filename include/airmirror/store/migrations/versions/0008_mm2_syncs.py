"""MM2 syncs: MM2's offset syncs imported by ``airmirror takeover``, translated as MM2 translates.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "airmirror_mm2_syncs",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("upstream_offset", sa.BigInteger(), nullable=False),
        sa.Column("downstream_offset", sa.BigInteger(), nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"], ["airmirror_batches.id"], name="fk_airmirror_mm2_syncs_batch_id_airmirror_batches"
        ),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", "upstream_offset", name="pk_airmirror_mm2_syncs"),
    )


def downgrade() -> None:
    op.drop_table("airmirror_mm2_syncs")
