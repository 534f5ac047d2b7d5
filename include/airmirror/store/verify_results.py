"""Verifications (:class:`VerificationStore`, a part of :class:`~airmirror.store.metadata_store.MetadataStore`).

Contract: each ``airmirror verify`` is stored whole, its partitions with it, in one transaction, and never
changed; reading returns a flow's newest one (by id), so ``status`` shows the last verification.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import select

from airmirror.model import PartitionVerification, Verification
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import as_columns, from_columns, insert_many, insert_one
from airmirror.store.schema import verifications, verified_partitions


class VerificationStore(EngineHolder):
    """Verifications of the store's flows (see the module docstring for the contract)."""

    def record_verification(self, verification: Verification) -> Verification:
        """Store ``verification`` with its partitions; returns it with its id."""
        with self._write(f"record a verification of flow {verification.flow!r}") as connection:
            row = {
                "flow": verification.flow,
                "verified_at": verification.verified_at,
                "topics_regex": verification.topics_regex,
            }
            verification_id = insert_one(connection, verifications, row)
            rows = [{"verification_id": verification_id, **as_columns(p)} for p in verification.partitions]
            insert_many(connection, verified_partitions, rows)
        return replace(verification, id=verification_id)

    def last_verification(self, flow: str) -> Verification | None:
        """The flow's newest verification, its partitions by topic and partition; ``None`` before the first."""
        with self._read(f"read the last verification of flow {flow!r}") as connection:
            head = connection.execute(
                select(verifications).where(verifications.c.flow == flow).order_by(verifications.c.id.desc()).limit(1)
            ).one_or_none()
            if head is None:
                return None
            rows = connection.execute(
                select(verified_partitions)
                .where(verified_partitions.c.verification_id == head.id)
                .order_by(verified_partitions.c.topic, verified_partitions.c.partition)
            )
            partitions = [from_columns(PartitionVerification, row) for row in rows]
        return Verification(head.flow, head.verified_at, head.topics_regex, partitions, head.id)
