"""Flow prunes: when each flow's history was last pruned, so that retention runs once per interval per flow
whichever process commits its batches (each Airflow task and each CLI run is a process of its own).

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
        "airmirror_flow_prunes",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("pruned_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("flow", name="pk_airmirror_flow_prunes"),
    )


def downgrade() -> None:
    op.drop_table("airmirror_flow_prunes")
