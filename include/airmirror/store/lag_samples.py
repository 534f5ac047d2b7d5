"""Lag over time (:class:`LagStore`, a part of :class:`~airmirror.store.metadata_store.MetadataStore`).

Contract: samples are only added, one row per partition and sampling time, so the figures can be plotted over
time; reading returns them oldest first.  Each batch commit adds one sample per partition it copied
(:mod:`airmirror.replication.recording`).

Bounded reads for a view: :meth:`LagStore.lag_series` aggregates a time window in the database into at most a
given number of points, and :meth:`LagStore.newest_lag_samples` returns one row per partition, so the rows read
do not grow with the sample rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, ColumnElement, Float, and_, cast, extract, func, select, type_coerce

from airmirror.model import LagSample
from airmirror.store.engine import EngineHolder
from airmirror.store.rows import as_columns, from_columns, insert_many
from airmirror.store.schema import lag_samples

_UNIX_EPOCH_JULIAN_DAY = 2440587.5


@dataclass(frozen=True)
class LagPoint:
    """One point of a flow's lag over time: the newest sampling instant ``at`` of its time bucket, the largest
    total lag in records (summed over the partitions sampled at one instant), the oldest record age and the
    largest replication latency of the bucket."""

    at: datetime
    lag_records: int
    record_age_ms: int | None
    replication_latency_ms: int | None


class LagStore(EngineHolder):
    """Lag samples of the store's flows (see the module docstring for the contract)."""

    def record_lag_samples(self, flow: str, samples: Sequence[LagSample]) -> None:
        """Add ``samples`` of ``flow``."""
        with self._write(f"record lag samples of flow {flow!r}") as connection:
            insert_many(connection, lag_samples, [{"flow": flow, **as_columns(sample)} for sample in samples])

    def lag_samples(self, flow: str, since: datetime | None = None) -> list[LagSample]:
        """The flow's samples taken at or after ``since`` (all without it), oldest first."""
        query = select(lag_samples).where(lag_samples.c.flow == flow)
        if since is not None:
            query = query.where(lag_samples.c.sampled_at >= since)
        order = (lag_samples.c.sampled_at, lag_samples.c.topic, lag_samples.c.partition)
        with self._read(f"read lag samples of flow {flow!r}") as connection:
            return [from_columns(LagSample, row) for row in connection.execute(query.order_by(*order))]

    def newest_lag_samples(self, flow: str, since: datetime) -> list[LagSample]:
        """The newest sample of each partition of the flow taken at or after ``since``, by topic and partition."""
        newest = (
            select(lag_samples.c.topic, lag_samples.c.partition, func.max(lag_samples.c.sampled_at).label("newest"))
            .where(lag_samples.c.flow == flow, lag_samples.c.sampled_at >= since)
            .group_by(lag_samples.c.topic, lag_samples.c.partition)
            .subquery()
        )
        query = (
            select(lag_samples)
            .join(
                newest,
                and_(
                    lag_samples.c.topic == newest.c.topic,
                    lag_samples.c.partition == newest.c.partition,
                    lag_samples.c.sampled_at == newest.c.newest,
                ),
            )
            .where(lag_samples.c.flow == flow)
            .order_by(lag_samples.c.topic, lag_samples.c.partition)
        )
        with self._read(f"read the newest lag samples of flow {flow!r}") as connection:
            return [from_columns(LagSample, row) for row in connection.execute(query)]

    def lag_series(self, flow: str, since: datetime, until: datetime, points: int) -> list[LagPoint]:
        """The flow's lag from ``since`` to ``until`` (both included) as at most ``points`` points, oldest first.

        The window is cut into ``points`` equal time buckets (each a millisecond wider than a ``points``-th of
        the window, in whole milliseconds, so ``until`` falls in the last one) and the database aggregates each
        bucket that holds samples into one :class:`LagPoint`, so at most ``points`` rows are read whatever the
        sample rate or partition count.
        """
        if points < 1 or until < since:
            raise ValueError(f"lag_series needs points >= 1 and since <= until, not {points}, {since} .. {until}")
        bucket_ms = int((until - since).total_seconds() * 1000) // points + 1
        with self._read(f"read the lag series of flow {flow!r}") as connection:
            instants = (
                select(
                    lag_samples.c.sampled_at,
                    func.sum(lag_samples.c.lag_records).label("lag_records"),
                    func.max(lag_samples.c.record_age_ms).label("record_age_ms"),
                    func.max(lag_samples.c.replication_latency_ms).label("replication_latency_ms"),
                )
                .where(lag_samples.c.flow == flow, lag_samples.c.sampled_at >= since, lag_samples.c.sampled_at <= until)
                .group_by(lag_samples.c.sampled_at)
                .subquery()
            )
            offset_ms = (_epoch_seconds(instants.c.sampled_at, connection.dialect.name) - since.timestamp()) * 1000
            bucket = (cast(offset_ms, BigInteger) // bucket_ms).label("bucket")
            query = (
                select(
                    func.max(instants.c.sampled_at).label("at"),
                    func.max(instants.c.lag_records).label("lag_records"),
                    func.max(instants.c.record_age_ms).label("record_age_ms"),
                    func.max(instants.c.replication_latency_ms).label("replication_latency_ms"),
                )
                .group_by(bucket)
                .order_by(bucket)
            )
            return [
                LagPoint(row.at, int(row.lag_records), row.record_age_ms, row.replication_latency_ms)
                for row in connection.execute(query)
            ]


def _epoch_seconds(moment: ColumnElement[datetime], dialect: str) -> ColumnElement[float]:
    """Seconds since the Unix epoch of a stored timestamp (SQLite keeps UTC text, read with ``julianday``)."""
    if dialect == "sqlite":
        return (func.julianday(moment) - _UNIX_EPOCH_JULIAN_DAY) * 86400.0
    # SQLAlchemy types EXTRACT as an integer; PostgreSQL's epoch has the fractional seconds (numeric)
    return type_coerce(extract("epoch", moment), Float)
