"""Gone topics: the copied source topics a flow's source cluster no longer holds, since when, so that the health
state, the replication overview and the flow-state metric count them as stopped.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "airmirror_gone_topics",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("flow", "topic", name="pk_airmirror_gone_topics"),
    )


def downgrade() -> None:
    op.drop_table("airmirror_gone_topics")
