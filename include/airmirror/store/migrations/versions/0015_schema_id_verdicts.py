"""Schema id verdicts: ``airmirror verify`` compares records through the flow's schema id map, and a copy that
differs from its source record only in a schema id the map does not explain gets the verdict ``schema_id``,
counted per partition with the first of them in words.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TABLE = "airmirror_verified_partitions"
CHECK = "ck_airmirror_verified_partitions_verdict"
BEFORE = (
    "EQUAL",
    "MISSING",
    "EXTRA",
    "DIFFERENT",
    "STOPPED",
    "SOURCE_DELETED",
    "SOURCE_RECREATED",
    "TARGET_DELETED",
    "TARGET_RECREATED",
    "NO_RUNS",
)
ADDED = ("SCHEMA_ID",)


def verdict_check(names: tuple[str, ...]) -> str:
    return "verdict IN ({})".format(", ".join(f"'{name}'" for name in names))


def upgrade() -> None:
    with op.batch_alter_table(TABLE, recreate="auto") as batch:
        batch.drop_constraint(CHECK, type_="check")
        batch.create_check_constraint(CHECK, verdict_check(BEFORE + ADDED))
        batch.add_column(sa.Column("schema_id", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("schema_id_difference", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.execute(sa.text(f"UPDATE {TABLE} SET verdict = 'DIFFERENT', different = schema_id WHERE verdict = 'SCHEMA_ID'"))
    with op.batch_alter_table(TABLE, recreate="auto") as batch:
        batch.drop_column("schema_id_difference")
        batch.drop_column("schema_id")
        batch.drop_constraint(CHECK, type_="check")
        batch.create_check_constraint(CHECK, verdict_check(BEFORE))
