"""Verifications: every ``airmirror verify`` of a flow, and its result per partition.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COUNTS = ("source_records", "target_records", "missing", "extra", "different", "compacted_source", "compacted_target")


def upgrade() -> None:
    op.create_table(
        "airmirror_verifications",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("verified_at", TIMESTAMP, nullable=False),
        sa.Column("topics_regex", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_airmirror_verifications"),
    )
    op.create_index("ix_airmirror_verifications_flow_id", "airmirror_verifications", ["flow", "id"])
    op.create_table(
        "airmirror_verified_partitions",
        sa.Column("verification_id", ID, nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("remote_topic", sa.String(249), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("first_offset", sa.BigInteger(), nullable=True),
        *(
            sa.Column(name, sa.BigInteger(), nullable=False)
            for name in ("source_start", "source_end", "target_start", "target_end")
        ),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in COUNTS),
        sa.Column("source_digest", sa.String(64), nullable=False),
        sa.Column("target_digest", sa.String(64), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "verdict IN ('EQUAL', 'MISSING', 'EXTRA', 'DIFFERENT')", name="ck_airmirror_verified_partitions_verdict"
        ),
        sa.ForeignKeyConstraint(
            ["verification_id"], ["airmirror_verifications.id"], name="fk_airmirror_verified_partitions_verification"
        ),
        sa.PrimaryKeyConstraint("verification_id", "topic", "partition", name="pk_airmirror_verified_partitions"),
    )


def downgrade() -> None:
    op.drop_table("airmirror_verified_partitions")
    op.drop_index("ix_airmirror_verifications_flow_id", "airmirror_verifications")
    op.drop_table("airmirror_verifications")
