"""Topic incarnations: source topic ids on cursors and ranges, remote topic ids, stops and source resets.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)
TOPIC_ID = sa.String(32)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("airmirror_cursors", sa.Column("source_topic_id", TOPIC_ID, nullable=True))
    op.add_column("airmirror_batch_ranges", sa.Column("source_topic_id", TOPIC_ID, nullable=True))
    op.add_column("airmirror_batch_ranges", sa.Column("reset_from", sa.BigInteger(), nullable=True))
    op.create_table(
        "airmirror_remote_topics",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("topic_id", TOPIC_ID, nullable=False),
        sa.Column("recorded_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("flow", "topic", name="pk_airmirror_remote_topics"),
    )
    op.create_table(
        "airmirror_stops",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("stopped_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", name="pk_airmirror_stops"),
    )
    op.create_table(
        "airmirror_source_resets",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("old_topic_id", TOPIC_ID, nullable=True),
        sa.Column("new_topic_id", TOPIC_ID, nullable=True),
        sa.Column("old_cursor", sa.BigInteger(), nullable=False),
        sa.Column("new_start", sa.BigInteger(), nullable=False),
        sa.Column("reset_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"], ["airmirror_batches.id"], name="fk_airmirror_source_resets_batch_id_airmirror_batches"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_airmirror_source_resets"),
    )
    op.create_index("ix_airmirror_source_resets_flow_id", "airmirror_source_resets", ["flow", "id"])


def downgrade() -> None:
    op.drop_index("ix_airmirror_source_resets_flow_id", "airmirror_source_resets")
    op.drop_table("airmirror_source_resets")
    op.drop_table("airmirror_stops")
    op.drop_table("airmirror_remote_topics")
    op.drop_column("airmirror_batch_ranges", "reset_from")
    op.drop_column("airmirror_batch_ranges", "source_topic_id")
    op.drop_column("airmirror_cursors", "source_topic_id")
