"""Each flow's newest failed run (``airmirror_run_failures``): when it failed and why, one row per flow.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TABLE = "airmirror_run_failures"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("flow", name=f"pk_{TABLE}"),
    )


def downgrade() -> None:
    op.drop_table(TABLE)
