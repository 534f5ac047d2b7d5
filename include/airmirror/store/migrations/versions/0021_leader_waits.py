"""Leader waits: the source partitions a flow's plans leave where they stand because they have no leader, and since
when, so that ``status`` and the health state name them.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "airmirror_leader_waits",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", name="pk_airmirror_leader_waits"),
    )


def downgrade() -> None:
    op.drop_table("airmirror_leader_waits")
