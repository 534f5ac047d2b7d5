"""Lag samples: per partition and point in time, the lag in records, the record age and the replication latency.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "airmirror_lag_samples",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("sampled_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lag_records", sa.BigInteger(), nullable=False),
        sa.Column("record_age_ms", sa.BigInteger(), nullable=True),
        sa.Column("replication_latency_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", "sampled_at", name="pk_airmirror_lag_samples"),
    )
    op.create_index("ix_airmirror_lag_samples_flow_sampled_at", "airmirror_lag_samples", ["flow", "sampled_at"])


def downgrade() -> None:
    op.drop_index("ix_airmirror_lag_samples_flow_sampled_at", "airmirror_lag_samples")
    op.drop_table("airmirror_lag_samples")
