"""Verdict reasons: the verdicts of partitions that could not be compared (stopped, deleted or recreated
topics, no offset-sync runs), and why each partition's verdict is not ``equal``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TABLE = "airmirror_verified_partitions"
CHECK = "ck_airmirror_verified_partitions_verdict"
COMPARED = ("EQUAL", "MISSING", "EXTRA", "DIFFERENT")
NOT_COMPARED = ("STOPPED", "SOURCE_DELETED", "SOURCE_RECREATED", "TARGET_DELETED", "TARGET_RECREATED", "NO_RUNS")


def verdict_check(names: tuple[str, ...]) -> str:
    return "verdict IN ({})".format(", ".join(f"'{name}'" for name in names))


def upgrade() -> None:
    with op.batch_alter_table(TABLE, recreate="auto") as batch:
        batch.drop_constraint(CHECK, type_="check")
        batch.create_check_constraint(CHECK, verdict_check(COMPARED + NOT_COMPARED))
        batch.add_column(sa.Column("reason", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.execute(sa.text(f"DELETE FROM {TABLE} WHERE verdict IN ({', '.join(repr(n) for n in NOT_COMPARED)})"))
    with op.batch_alter_table(TABLE, recreate="auto") as batch:
        batch.drop_column("reason")
        batch.drop_constraint(CHECK, type_="check")
        batch.create_check_constraint(CHECK, verdict_check(COMPARED))
