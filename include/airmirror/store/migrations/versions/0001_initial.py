"""Initial metadata store schema: batches, batch ranges, cursors, offset syncs and gaps.

Revision ID: 0001
Revises:
Create Date: 2026-11-20
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
RUNNING_ONLY = sa.text("state = 'RUNNING'")


def _key_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
    ]


def _batch_ref(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["batch_id"], ["airmirror_batches.id"], name=f"fk_{table}_batch_id_airmirror_batches"
    )


def upgrade() -> None:
    op.create_table(
        "airmirror_batches",
        sa.Column("id", ID, nullable=False, autoincrement=True),
        sa.Column("flow", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("state IN ('RUNNING', 'COMMITTED', 'FAILED')", name="ck_airmirror_batches_batch_state"),
        sa.PrimaryKeyConstraint("id", name="pk_airmirror_batches"),
    )
    op.create_index("ix_airmirror_batches_flow_id", "airmirror_batches", ["flow", "id"])
    op.create_index(
        "ux_airmirror_batches_running_flow",
        "airmirror_batches",
        ["flow"],
        unique=True,
        postgresql_where=RUNNING_ONLY,
        sqlite_where=RUNNING_ONLY,
    )

    op.create_table(
        "airmirror_batch_ranges",
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("start_offset", sa.BigInteger(), nullable=False),
        sa.Column("end_offset", sa.BigInteger(), nullable=False),
        sa.Column("remote_topic", sa.String(249), nullable=False),
        sa.Column("gap_start", sa.BigInteger(), nullable=True),
        sa.Column("moved_from", sa.BigInteger(), nullable=True),
        sa.Column("records", sa.BigInteger(), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("downstream_start", sa.BigInteger(), nullable=True),
        sa.Column("downstream_end", sa.BigInteger(), nullable=True),
        _batch_ref("airmirror_batch_ranges"),
        sa.PrimaryKeyConstraint("batch_id", "topic", "partition", name="pk_airmirror_batch_ranges"),
    )

    op.create_table(
        "airmirror_cursors",
        *_key_columns(),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        _batch_ref("airmirror_cursors"),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", name="pk_airmirror_cursors"),
    )

    op.create_table(
        "airmirror_offset_syncs",
        *_key_columns(),
        sa.Column("upstream_start", sa.BigInteger(), nullable=False),
        sa.Column("upstream_end", sa.BigInteger(), nullable=False),
        sa.Column("downstream_start", sa.BigInteger(), nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        _batch_ref("airmirror_offset_syncs"),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", "upstream_start", name="pk_airmirror_offset_syncs"),
    )
    op.create_index(
        "ux_airmirror_offset_syncs_upstream_end",
        "airmirror_offset_syncs",
        ["flow", "topic", "partition", "upstream_end"],
        unique=True,
    )

    op.create_table(
        "airmirror_gaps",
        *_key_columns(),
        sa.Column("start_offset", sa.BigInteger(), nullable=False),
        sa.Column("end_offset", sa.BigInteger(), nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("detected_at", TIMESTAMP, nullable=False),
        _batch_ref("airmirror_gaps"),
        sa.PrimaryKeyConstraint("flow", "topic", "partition", "start_offset", name="pk_airmirror_gaps"),
    )


def downgrade() -> None:
    for table in (
        "airmirror_gaps",
        "airmirror_offset_syncs",
        "airmirror_cursors",
        "airmirror_batch_ranges",
        "airmirror_batches",
    ):
        op.drop_table(table)
