"""Flow leases: at most one run replicates a flow at a time.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "airmirror_flow_leases",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("token", sa.String(32), nullable=False),
        sa.Column("process", sa.String(255), nullable=True),
        sa.Column("acquired_at", TIMESTAMP, nullable=False),
        sa.Column("renewed_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("flow", name="pk_airmirror_flow_leases"),
    )


def downgrade() -> None:
    op.drop_table("airmirror_flow_leases")
