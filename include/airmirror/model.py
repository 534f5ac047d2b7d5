"""Plain value types passed between the planner, the Spark job and the metadata store.

Offsets follow Kafka's convention: a range ``[start, end)`` includes ``start`` and excludes ``end``;
a cursor is the next source offset to copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class PartitionKey:
    """A source topic-partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class OffsetRun:
    """A contiguous run of replicated records.

    Upstream offsets ``[upstream_start, upstream_end)`` were all copied, in order, to downstream offsets
    ``[downstream_start, downstream_start + (upstream_end - upstream_start))``.  Compaction holes,
    aborted records and transaction markers break runs, so a batch yields one or more runs.
    """

    upstream_start: int
    upstream_end: int
    downstream_start: int

    @property
    def length(self) -> int:
        return self.upstream_end - self.upstream_start


@dataclass(frozen=True)
class Gap:
    """Source offsets ``[start, end)`` that retention deleted before they were copied."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class PlannedRange:
    """What one batch copies from one source partition: source offsets ``[start, end)``.

    ``gap_start`` is set when the stored cursor pointed below the log start offset: ``[gap_start, start)``
    was lost to retention and is recorded as a :class:`Gap` when the batch commits.

    ``moved_from`` is set when the user explicitly moved an existing cursor (``start_from`` with
    ``reset_cursor``): it is the stored cursor the range replaces, and the move commits with the batch.

    ``source_topic_id`` is the source topic's id at planning time (``None`` when the broker gave none).
    ``reset_from`` is set when the stored cursor belonged to an earlier incarnation of the source topic, or
    pointed above a truncated log (see :mod:`airmirror.replication.planner`): the range starts afresh, and the batch's
    commit records a source reset and starts a new generation of offset-sync runs for the partition.

    ``start_epoch`` is the source leader epoch of the record just before ``start`` (the stored cursor's), when
    known: the range read validates its start against it (KIP-320), so a log truncated below ``start`` is
    never read past.  ``truncated_at`` is set when leader epochs showed that the source log diverged at that
    offset, below the stored cursor (an unclean leader election): the range starts there, and the reset keeps
    the offset-sync runs below it.
    """

    topic: str
    partition: int
    start: int
    end: int
    remote_topic: str
    gap_start: int | None = None
    moved_from: int | None = None
    source_topic_id: str | None = None
    reset_from: int | None = None
    start_epoch: int | None = None
    truncated_at: int | None = None

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start

    def gap(self) -> Gap | None:
        if self.gap_start is None or self.gap_start >= self.start:
            return None
        return Gap(self.topic, self.partition, self.gap_start, self.start)


@dataclass(frozen=True)
class RangeResult:
    """The outcome of copying one :class:`PlannedRange`, as committed to Kafka.

    ``records``/``bytes`` count what was written; ``runs`` map every copied upstream offset to its
    downstream offset.  ``downstream_end`` is the target offset after the last copied record
    (``None`` when nothing was copied).  ``end_epoch`` is the source leader epoch of the record at ``end - 1``
    when known: it goes with the cursor, for the next range's start validation.
    """

    topic: str
    partition: int
    start: int
    end: int
    records: int
    bytes: int
    runs: tuple[OffsetRun, ...] = field(default_factory=tuple)
    downstream_start: int | None = None
    downstream_end: int | None = None
    end_epoch: int | None = None
