"""Checkpoints, group offset sync outcomes, heartbeat latency and emissions; downstream index on offset syncs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-27
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def _flow_and_group() -> list[sa.Column[Any]]:
    return [
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("group_id", sa.String(255), nullable=False),
    ]


def upgrade() -> None:
    op.create_index(
        "ix_airmirror_offset_syncs_downstream",
        "airmirror_offset_syncs",
        ["flow", "topic", "partition", "downstream_start"],
    )

    op.create_table(
        "airmirror_checkpoints",
        *_flow_and_group(),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("remote_topic", sa.String(249), nullable=False),
        sa.Column("upstream_offset", sa.BigInteger(), nullable=False),
        sa.Column("downstream_offset", sa.BigInteger(), nullable=False),
        sa.Column("commit_metadata", sa.Text(), nullable=False),
        sa.Column("emitted_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("flow", "group_id", "topic", "partition", name="pk_airmirror_checkpoints"),
    )

    op.create_table(
        "airmirror_group_syncs",
        *_flow_and_group(),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("target_state", sa.String(32), nullable=False),
        sa.Column("offsets_committed", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("synced_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint(
            "outcome IN ('SYNCED', 'UP_TO_DATE', 'SKIPPED_ACTIVE', 'FAILED')",
            name="ck_airmirror_group_syncs_group_sync_outcome",
        ),
        sa.PrimaryKeyConstraint("flow", "group_id", name="pk_airmirror_group_syncs"),
    )

    op.create_table(
        "airmirror_heartbeat_latency",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("source_alias", sa.String(255), nullable=False),
        sa.Column("target_alias", sa.String(255), nullable=False),
        sa.Column("heartbeat_at", TIMESTAMP, nullable=False),
        sa.Column("observed_at", TIMESTAMP, nullable=False),
        sa.Column("latency_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("flow", "source_alias", "target_alias", name="pk_airmirror_heartbeat_latency"),
    )

    op.create_table(
        "airmirror_heartbeat_emissions",
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("heartbeat_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("flow", name="pk_airmirror_heartbeat_emissions"),
    )


def downgrade() -> None:
    for table in (
        "airmirror_heartbeat_emissions",
        "airmirror_heartbeat_latency",
        "airmirror_group_syncs",
        "airmirror_checkpoints",
    ):
        op.drop_table(table)
    op.drop_index("ix_airmirror_offset_syncs_downstream", table_name="airmirror_offset_syncs")
