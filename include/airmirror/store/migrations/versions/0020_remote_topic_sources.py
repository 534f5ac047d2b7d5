"""The source topic of each recorded remote topic, so a run notices a source topic that a changed router (or
replication policy) now sends to another remote topic, and starts it afresh there.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("airmirror_remote_topics") as table:
        table.add_column(sa.Column("source_topic", sa.String(249)))


def downgrade() -> None:
    with op.batch_alter_table("airmirror_remote_topics") as table:
        table.drop_column("source_topic")
