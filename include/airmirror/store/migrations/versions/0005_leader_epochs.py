"""Source leader epochs: on cursors and planned ranges, and where a range restarts after a log truncation.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("airmirror_cursors", sa.Column("leader_epoch", sa.Integer(), nullable=True))
    op.add_column("airmirror_batch_ranges", sa.Column("start_epoch", sa.Integer(), nullable=True))
    op.add_column("airmirror_batch_ranges", sa.Column("truncated_at", sa.BigInteger(), nullable=True))
    op.add_column("airmirror_batch_ranges", sa.Column("end_epoch", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("airmirror_batch_ranges", "end_epoch")
    op.drop_column("airmirror_batch_ranges", "truncated_at")
    op.drop_column("airmirror_batch_ranges", "start_epoch")
    op.drop_column("airmirror_cursors", "leader_epoch")
