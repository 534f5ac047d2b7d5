"""Each flow's newest failed run (:class:`RunFailureStore`, a part of
:class:`~airmirror.store.metadata_store.MetadataStore`).

Contract: one row per flow, the newest failure kept (an upsert), so the table never grows with history.  A run
that succeeds after it does not delete it: whether a flow is failing is decided by comparing the failure's time
with the flow's newest committed batch (:mod:`airmirror.replication.health`).  The error text is the one the run
showed its user, which names no secret.
"""

from __future__ import annotations

from sqlalchemy import select

from airmirror.model import RunFailure
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import upsert
from airmirror.store.schema import run_failures

ERROR_CHARS = 2000
"""The most characters of a failure's error text kept."""


class RunFailureStore(EngineHolder):
    """The newest failed run of each of the store's flows (see the module docstring for the contract)."""

    def record_run_failure(self, flow: str, failure: RunFailure) -> None:
        """Make ``failure`` the flow's newest failed run."""
        with self._unfenced_write(f"record a failed run of flow {flow!r}") as connection:
            row = {"flow": flow, "failed_at": failure.failed_at, "error": failure.error[:ERROR_CHARS]}
            upsert(connection, run_failures, [row])

    def run_failure(self, flow: str) -> RunFailure | None:
        """The flow's newest failed run, ``None`` if none ever failed."""
        with self._read(f"read the newest failed run of flow {flow!r}") as connection:
            row = connection.execute(select(run_failures).where(run_failures.c.flow == flow)).one_or_none()
        return None if row is None else RunFailure(row.failed_at, row.error)
