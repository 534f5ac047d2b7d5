"""Retention of the metadata DB's history (:class:`RetentionStore`, a part of
:class:`~airmirror.store.metadata_store.MetadataStore`; the age is ``airmirror.metadata.retention``).

Contract of :meth:`RetentionStore.prune_history` for one flow and a moment ``before``:

* **Batches**: a ``COMMITTED`` or ``FAILED`` batch that finished before ``before`` is deleted with its ranges,
  unless something still needs it: a cursor, a gap, a source reset or an imported MM2 sync names it, or it is
  the flow's first committed batch (a takeover from MM2 is found as that batch, see
  :meth:`~airmirror.store.batches.BatchStore.mm2_sync_before`).  A ``RUNNING`` batch is never touched.
  :meth:`~airmirror.store.batches.BatchStore.partition_stats` reads the totals each commit added up
  (``airmirror_partition_totals``), so it shows the same figures before and after.
* **Offset-sync runs** outlive their batch: a run whose batch is deleted keeps its offsets with ``batch_id``
  ``NULL``.  Every chunk transaction leaves a commit marker in the remote partition, so consecutive batches'
  runs rarely continue each other exactly (when they do, the commit extends the stored run in place) and a
  partition gains about one run per batch.  :meth:`RetentionStore.prune_runs` deletes the runs that no
  translation can need any more, given the partition's log start offsets on both clusters (see there).
* **Folding** (:meth:`RetentionStore.fold_runs`) keeps a partition's run count bounded where Kafka keeps the
  data (so ``prune_runs`` deletes nothing), growing with partitions and resets, not with batches.  Exact
  merging is impossible (the remote partition has one commit marker per chunk transaction), so old runs are
  folded *lossily* (:mod:`airmirror.store.folding` has the policy and its constants): the newest
  :data:`~airmirror.store.folding.EXACT_RUNS` (16) runs of each partition, roughly the last 16 batches that
  copied into it, always stay exact; beyond ``EXACT_RUNS + FOLD_SIZE`` exact runs, the oldest ones fold 16
  at a time into one folded :class:`~airmirror.model.OffsetRun` (``batch_id`` ``NULL``); beyond
  ``FOLDED_RUNS`` (16) folded runs, the oldest two merge.  A partition so holds at most about 48 runs plus
  those of the batches committed since the last fold.  Translation inside a folded run is at or before the
  exact position (MM2's rule: a consumer may re-read records, never skip any), by at most the offsets of the
  run that hold no copy: about one commit marker per folded transaction, so about one re-read record per
  transaction folded below the translated offset (plus any aborted records and compaction holes there).
  The runs of the flow's first committed batch, when it is a takeover from MM2, are never folded:
  :meth:`~airmirror.store.batches.BatchStore.mm2_sync_before` finds where exact positions begin through them.
* **Gaps** detected before ``before`` are deleted (the partition totals keep their number and offsets).
* **Lag samples** taken before ``before`` are deleted.
* **Verifications** run before ``before`` are deleted with their partitions, except the flow's newest.
* Checkpoints, group syncs, heartbeats, cursors, stops, source resets and remote topic ids keep one row per key
  (or grow with resets only) and are not pruned.

Every step is an indexed delete.  Batches go in chunks of :data:`BATCHES_PER_TRANSACTION`, one transaction
each, so a first prune of a long history holds the database for one chunk at a time.  A fold is one grouped
count over the given partitions' runs, then a read, one range delete and one insert per partition that needs
folding, all in one transaction; it holds one partition's runs in memory at a time.  How often a partition's runs
are pruned and folded is :meth:`RetentionStore.claim_prunes`'s (one row per partition, ``airmirror_partition_prunes``):
once per interval in which a batch copies it, whichever process commits the flow's batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection, Table, and_, case, delete, exists, func, or_, select, tuple_, update

from airmirror.model import BatchState, PartitionKey
from airmirror.store.batches import offset_run, partition_runs, runs_of, takeover_batch
from airmirror.store.engine import EngineHolder
from airmirror.store.folding import EXACT_RUNS, FOLD_SIZE, FOLDED_RUNS, fold
from airmirror.store.range_commits import run_row, run_starts
from airmirror.store.rows import insert_many, upsert, utcnow
from airmirror.store.schema import (
    batch_ranges,
    batches,
    cursors,
    gaps,
    lag_samples,
    mm2_syncs,
    offset_syncs,
    partition_prunes,
    source_resets,
    verifications,
    verified_partitions,
)

BATCHES_PER_TRANSACTION = 1000
PRUNE_PARTITIONS_PER_STATEMENT = 200
"""How many partitions one statement of :meth:`RetentionStore.prune_runs` covers (its conditions grow with them)."""
KEEPERS: tuple[Table, ...] = (cursors, gaps, source_resets, mm2_syncs)
"""Tables whose rows keep the batch they name (every reference to ``airmirror_batches`` but its own ranges and
the offset-sync runs, which let go of it)."""


@dataclass(frozen=True)
class Pruned:
    """How many rows of a flow's history one :meth:`RetentionStore.prune_history` deleted."""

    batches: int = 0
    gaps: int = 0
    lag_samples: int = 0
    verifications: int = 0


class RetentionStore(EngineHolder):
    """Retention of the store's history (see the module docstring for the contract)."""

    def prune_history(self, flow: str, before: datetime) -> Pruned:
        """Delete ``flow``'s history older than ``before`` as the module docstring says; returns the counts."""
        with self._write(f"prune the gaps and samples of flow {flow!r}") as connection:
            gap_count = _prune_gaps(connection, flow, before)
            samples = connection.execute(
                delete(lag_samples).where(lag_samples.c.flow == flow, lag_samples.c.sampled_at < before)
            ).rowcount
            checks = _prune_verifications(connection, flow, before)
        batch_count = 0
        while True:
            with self._write(f"prune the batches of flow {flow!r}") as connection:
                pruned = _prune_batches(connection, flow, before)
            batch_count += pruned
            if pruned < BATCHES_PER_TRANSACTION:
                return Pruned(batch_count, gap_count, samples, checks)

    def claim_prunes(self, flow: str, keys: Iterable[PartitionKey], interval: timedelta) -> list[PartitionKey]:
        """The partitions of ``keys`` due for pruning: never pruned, or last pruned ``interval`` ago or more.
        They are marked pruned now, before the caller prunes them, so whichever process commits the flow's
        next batches (each CLI run and each Airflow task is a process of its own) leaves them alone for the
        interval; a prune that fails is tried again after it.  Every partition a batch copies is pruned at
        least once per interval in which it is copied, so its runs stay bounded whichever batches it is in.
        Two runs that claim at once both prune, which is harmless (pruning is idempotent); the flow lease
        keeps that rare.  One read per :data:`PRUNE_PARTITIONS_PER_STATEMENT` partitions and one upsert."""
        wanted = sorted(set(keys))
        now = utcnow()
        due: list[PartitionKey] = []
        with self._write(f"claim the prunes of flow {flow!r}") as connection:
            for first in range(0, len(wanted), PRUNE_PARTITIONS_PER_STATEMENT):
                chunk = wanted[first : first + PRUNE_PARTITIONS_PER_STATEMENT]
                recent = {
                    PartitionKey(topic, partition)
                    for topic, partition in connection.execute(
                        select(partition_prunes.c.topic, partition_prunes.c.partition).where(
                            partition_prunes.c.flow == flow,
                            tuple_(partition_prunes.c.topic, partition_prunes.c.partition).in_(
                                [(k.topic, k.partition) for k in chunk]
                            ),
                            partition_prunes.c.pruned_at > now - interval,
                        )
                    )
                }
                due += [key for key in chunk if key not in recent]
            upsert(
                connection,
                partition_prunes,
                [{"flow": flow, "topic": k.topic, "partition": k.partition, "pruned_at": now} for k in due],
            )
        return due

    def prune_runs(self, flow: str, log_starts: Mapping[PartitionKey, tuple[int, int]]) -> int:
        """Delete the runs of each partition of ``log_starts`` (its log start offsets on the source and on the
        target, as just read) that lie wholly below both, and whose batch was pruned; returns how many.

        With ``K`` the partition's last run whose ``upstream_start`` is at or below the source log start and whose
        ``downstream_start`` is at or below the target log start, the runs starting below ``K`` go.  Every offset
        they map translates to the log start anyway (forward translation raises a position to the target's log
        start, failback to the source's, and log starts only grow), and ``K`` gives that same position: exact
        translation, forward and failback, is unchanged.  ``verify`` compares from the log starts on, so its
        verdicts do not change either (its note on offsets deleted on both sides starts at ``K`` then).  The runs of
        the flow's first committed batch (a takeover's walk of MM2's tail) keep their batch, so they are kept.
        Two statements per :data:`PRUNE_PARTITIONS_PER_STATEMENT` partitions, whatever their number: one reads
        the runs at or below either log start (those that go, and ``K``), one deletes."""
        deleted = 0
        keys = list(log_starts)
        with self._write(f"prune the offset-sync runs of flow {flow!r}") as connection:
            for first in range(0, len(keys), PRUNE_PARTITIONS_PER_STATEMENT):
                chunk = {key: log_starts[key] for key in keys[first : first + PRUNE_PARTITIONS_PER_STATEMENT]}
                cutoffs = _prune_cutoffs(connection, flow, chunk)
                if cutoffs:
                    deleted += connection.execute(
                        delete(offset_syncs).where(
                            offset_syncs.c.flow == flow,
                            offset_syncs.c.batch_id.is_(None),
                            or_(
                                *(
                                    and_(_of_partition(key), offset_syncs.c.upstream_start < cut)
                                    for key, cut in cutoffs.items()
                                )
                            ),
                        )
                    ).rowcount
        return deleted

    def fold_runs(self, flow: str, keys: Iterable[PartitionKey]) -> int:
        """Fold the offset-sync runs of the partitions ``keys`` of ``flow`` that exceed the thresholds, as the
        module docstring says (one :func:`~airmirror.store.folding.fold` each); returns how many rows went.
        Translation through the folded runs stays at or before the exact position, and exact in each partition's
        newest runs.  A second call right after changes nothing (returns 0)."""
        wanted = set(keys)
        if not wanted:
            return 0
        removed = 0
        with self._write(f"fold the offset-sync runs of flow {flow!r}") as connection:
            kept_batch = takeover_batch(connection, flow)
            for key in _partitions_to_fold(connection, flow, wanted, kept_batch):
                removed += _fold_partition(connection, flow, key, kept_batch)
        return removed


def _of_partition(key: PartitionKey) -> ColumnElement[bool]:
    """The condition selecting one partition's runs among a flow's."""
    return and_(offset_syncs.c.topic == key.topic, offset_syncs.c.partition == key.partition)


def _prune_cutoffs(
    connection: Connection, flow: str, log_starts: Mapping[PartitionKey, tuple[int, int]]
) -> dict[PartitionKey, int]:
    """Per partition of ``log_starts`` with runs to prune, the ``upstream_start`` of its run ``K`` (see
    :meth:`RetentionStore.prune_runs`): the runs starting below it go.  One query for all of them."""
    below = or_(
        *(
            and_(
                _of_partition(key),
                or_(offset_syncs.c.upstream_start <= source, offset_syncs.c.downstream_start <= target),
            )
            for key, (source, target) in log_starts.items()
        )
    )
    rows = connection.execute(run_starts(flow).where(below))
    by_source: dict[PartitionKey, int] = {}
    by_target: dict[PartitionKey, tuple[int, int]] = {}
    for topic, partition, upstream_start, downstream_start in rows:
        key = PartitionKey(topic, partition)
        source, target = log_starts[key]
        if upstream_start <= source:
            by_source[key] = max(by_source.get(key, upstream_start), upstream_start)
        if downstream_start <= target and (key not in by_target or downstream_start > by_target[key][0]):
            by_target[key] = (downstream_start, upstream_start)
    return {key: min(by_source[key], by_target[key][1]) for key in by_source.keys() & by_target.keys()}


def _foldable(kept_batch: int | None) -> tuple[ColumnElement[bool], ...]:
    """The condition leaving out the runs of the takeover batch ``kept_batch`` (none when ``None``)."""
    if kept_batch is None:
        return ()
    return (or_(offset_syncs.c.batch_id.is_(None), offset_syncs.c.batch_id != kept_batch),)


def _partitions_to_fold(
    connection: Connection, flow: str, wanted: set[PartitionKey], kept_batch: int | None
) -> list[PartitionKey]:
    """The partitions of ``wanted`` with more foldable exact or folded runs than the thresholds: one grouped query."""
    exact = offset_syncs.c.downstream_end.is_(None)
    rows = connection.execute(
        select(offset_syncs.c.topic, offset_syncs.c.partition)
        .where(
            offset_syncs.c.flow == flow,
            offset_syncs.c.topic.in_(sorted({k.topic for k in wanted})),
            *_foldable(kept_batch),
        )
        .group_by(offset_syncs.c.topic, offset_syncs.c.partition)
        .having(
            or_(
                func.sum(case((exact, 1), else_=0)) > EXACT_RUNS + FOLD_SIZE,
                func.sum(case((exact, 0), else_=1)) > FOLDED_RUNS,
            )
        )
    )
    return sorted(found for row in rows if (found := PartitionKey(row.topic, row.partition)) in wanted)


def _fold_partition(connection: Connection, flow: str, key: PartitionKey, kept_batch: int | None) -> int:
    """Fold one partition's runs above the takeover's (those stay exact); returns how many rows went.  The runs
    that change are a stretch of the oldest foldable ones: one range delete, one insert."""
    where = partition_runs(flow, key)
    kept_end = (
        None
        if kept_batch is None
        else connection.execute(
            select(func.max(offset_syncs.c.upstream_end)).where(*where, offset_syncs.c.batch_id == kept_batch)
        ).scalar()
    )
    above = () if kept_end is None else (offset_syncs.c.upstream_start >= kept_end,)
    runs = [
        offset_run(row)
        for row in connection.execute(runs_of(flow, key).where(*above).order_by(offset_syncs.c.upstream_start))
    ]
    folded = fold(runs)
    same = 0
    while same < len(folded) and folded[-1 - same] == runs[-1 - same]:
        same += 1
    if same == len(runs):
        return 0
    stretch = (
        offset_syncs.c.upstream_start >= runs[0].upstream_start,
        offset_syncs.c.upstream_start <= runs[-1 - same].upstream_start,
    )
    connection.execute(delete(offset_syncs).where(*where, *stretch))
    insert_many(connection, offset_syncs, [run_row(flow, key, None, run) for run in folded[: len(folded) - same]])
    return len(runs) - len(folded)


def _prune_gaps(connection: Connection, flow: str, before: datetime) -> int:
    return connection.execute(delete(gaps).where(gaps.c.flow == flow, gaps.c.detected_at < before)).rowcount


def _prune_verifications(connection: Connection, flow: str, before: datetime) -> int:
    newest = select(func.max(verifications.c.id)).where(verifications.c.flow == flow).scalar_subquery()
    old = (
        connection.execute(
            select(verifications.c.id).where(
                verifications.c.flow == flow, verifications.c.verified_at < before, verifications.c.id < newest
            )
        )
        .scalars()
        .all()
    )
    if old:
        connection.execute(delete(verified_partitions).where(verified_partitions.c.verification_id.in_(old)))
        connection.execute(delete(verifications).where(verifications.c.id.in_(old)))
    return len(old)


def _prune_batches(connection: Connection, flow: str, before: datetime) -> int:
    """One chunk of at most :data:`BATCHES_PER_TRANSACTION` prunable batches, oldest first; returns how many."""
    first = (
        select(func.min(batches.c.id))
        .where(batches.c.flow == flow, batches.c.state == BatchState.COMMITTED)
        .scalar_subquery()
    )
    ids = (
        connection.execute(
            select(batches.c.id)
            .where(
                batches.c.flow == flow,
                batches.c.finished_at < before,
                batches.c.state.in_([BatchState.COMMITTED, BatchState.FAILED]),
                batches.c.id != func.coalesce(first, 0),
                *(~exists().where(table.c.batch_id == batches.c.id) for table in KEEPERS),
            )
            .order_by(batches.c.finished_at)
            .limit(BATCHES_PER_TRANSACTION)
        )
        .scalars()
        .all()
    )
    if not ids:
        return 0
    connection.execute(update(offset_syncs).where(offset_syncs.c.batch_id.in_(ids)).values(batch_id=None))
    connection.execute(delete(batch_ranges).where(batch_ranges.c.batch_id.in_(ids)))
    connection.execute(delete(batches).where(batches.c.id.in_(ids)))
    return len(ids)
