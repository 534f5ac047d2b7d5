"""The delivery reports of one chunk transaction of a copy task, and the offset-sync runs they prove.

Contract (rule 6 of :mod:`airmirror.replication.spark.task_writer` builds each chunk's runs from here):

1. **Segments.**  A range's records of one reader round go to their remote partition as one *segment*
   (:meth:`ChunkDeliveries.reports`): their source offsets, kept as runs of consecutive offsets (a record a
   transform dropped is a hole between two of them, never an entry of its own), and their count.
2. **Proven runs.**  Only the first and the last record of a segment carry a delivery report.  The segment's ``n``
   records were written to the target offsets ``first .. first + n - 1``, one for one in produce order, exactly
   when both reports succeeded and ``last - first == n - 1``: an idempotent producer writes a partition's records
   in produce order, at increasing offsets, so ``n`` of them between ``first`` and ``last`` fill every offset
   there.  A record of another writer in between, or one of the segment's that failed, breaks the equality.  A
   proven segment's source runs then map onto those target offsets in order (:meth:`ChunkDeliveries.runs`).  So a
   chunk pays two reports per segment, not one per record, and holds no per-record state.
3. **Anything unproven redoes the chunk, reporting every record.**  A failed report, a segment whose reports do not
   prove it, a ``produce()`` refused because the transaction failed, or a transaction found failed while the chunk
   waits for its deliveries (:meth:`ChunkDeliveries.check`; measured on Kafka 4.1: a refused record in the middle
   of a round leaves the records queued behind it unreported until the abort) raises :class:`Unproven`; the writer
   then aborts the chunk and copies it again from the ranges' committed progress with a report per record
   (:attr:`ChunkDeliveries.every_record`) for the rest of the attempt.  Then each record is a segment of its own:
   its report names it by source offset when it fails (:meth:`ChunkDeliveries.cause`), and its runs break
   wherever the target's offsets skip.
4. **The batch log's and the dead-letter queue's records** carry :meth:`ChunkDeliveries.logged`, which keeps their
   failures for :meth:`ChunkDeliveries.cause`.

A chunk's reports go to its own :class:`ChunkDeliveries`: reports of an aborted chunk that arrive later (librdkafka
reports the records an abort purged) change nothing the next chunk reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from airmirror.errors import ReplicationFailure
from airmirror.model import OffsetRun
from airmirror.replication.offset_runs import RunBuilder

Report = Callable[[KafkaError | None, Message], None]
PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
"""Delivery errors of records librdkafka dropped because their transaction had failed: consequences, not causes."""


@dataclass(frozen=True)
class DeliveryFailure:
    """A failed delivery report: the range its record belongs to and the record's source offset (both ``None`` for a
    batch-log or dead-letter record, rule 4), the error, and the size of the record's key and value in bytes."""

    source_range: Any
    offset: int | None
    error: KafkaError
    size: int

    @property
    def purged(self) -> bool:
        """Whether librdkafka dropped the record because its transaction had failed already: a consequence."""
        return self.error.code() in PURGED


class Unproven(Exception):
    """The chunk's deliveries do not prove where every record went (rule 3): abort it and copy it again, reporting
    every record."""


class Segment:
    """Records produced to one remote partition in one go, in order (rule 1): their source offsets as ``[start,
    stop)`` runs of consecutive offsets, their count, and the target offsets of the first and the last once
    reported."""

    __slots__ = ("chunk", "first", "last", "range", "records", "sources")

    def __init__(self, chunk: ChunkDeliveries, source_range: Any, offsets: Sequence[int]) -> None:
        self.chunk, self.range = chunk, source_range
        self.records = len(offsets)
        self.sources = source_runs(offsets)
        self.first: int | None = None
        self.last: int | None = None

    def first_report(self, error: KafkaError | None, message: Message) -> None:
        """The report of the segment's first record."""
        if error is not None:
            self.chunk.failed(self.range, self.sources[0][0], error, message)
        else:
            self.first = message.offset()

    def last_report(self, error: KafkaError | None, message: Message) -> None:
        """The report of the segment's last record."""
        if error is not None:
            self.chunk.failed(self.range, self.sources[-1][1] - 1, error, message)
        else:
            self.last = message.offset()

    def only_report(self, error: KafkaError | None, message: Message) -> None:
        """The report of the record of a segment of one."""
        self.first_report(error, message)
        self.last = self.first

    @property
    def proven(self) -> bool:
        """Whether the reports prove where each record went (rule 2)."""
        return self.first is not None and self.last is not None and self.last - self.first == self.records - 1


def source_runs(offsets: Sequence[int]) -> list[tuple[int, int]]:
    """Increasing source offsets as ``[start, stop)`` runs of consecutive offsets; one step when they have no
    hole."""
    if not offsets:
        return []
    if offsets[-1] - offsets[0] == len(offsets) - 1:
        return [(offsets[0], offsets[-1] + 1)]
    runs: list[tuple[int, int]] = []
    start = previous = offsets[0]
    for offset in offsets[1:]:
        if offset != previous + 1:
            runs.append((start, previous + 1))
            start = offset
        previous = offset
    runs.append((start, previous + 1))
    return runs


class ChunkDeliveries:
    """The reports of one chunk's records (see the module docstring); ``every_record`` for a chunk copied again
    after an unproven one (rule 3)."""

    def __init__(self, every_record: bool = False) -> None:
        self.every_record = every_record
        self.segments: dict[tuple[str, int], list[Segment]] = {}
        self.errors: list[DeliveryFailure] = []

    def reports(self, remote: tuple[str, int], source_range: Any, offsets: Sequence[int]) -> list[Report | None]:
        """The reports that the records of ``offsets`` (source offsets, increasing), about to be produced to
        ``remote`` (topic, partition) after the chunk's earlier records there, carry, in produce order: the first
        and the last one's (rule 2), or every one's (rule 3)."""
        if not offsets:
            return []  # a round whose records the transforms all dropped writes nothing to prove
        segments = self.segments.setdefault(remote, [])
        if self.every_record:
            made = [Segment(self, source_range, (offset,)) for offset in offsets]
            segments += made
            return [segment.only_report for segment in made]
        segment = Segment(self, source_range, offsets)
        segments.append(segment)
        reports: list[Report | None] = [None] * len(offsets)
        if len(offsets) == 1:
            reports[0] = segment.only_report
        else:
            reports[0], reports[-1] = segment.first_report, segment.last_report
        return reports

    def failed(self, source_range: Any, offset: int | None, error: KafkaError, message: Message) -> None:
        """Keep a failed report."""
        size = len(message.key() or b"") + len(message.value() or b"")
        self.errors.append(DeliveryFailure(source_range, offset, error, size))

    def logged(self, error: KafkaError | None, message: Message) -> None:
        """The report of a batch-log or dead-letter record (rule 4)."""
        if error is not None:
            self.failed(None, None, error, message)

    def cause(self) -> DeliveryFailure | None:
        """The first failure that is not a record purged because its transaction had failed already (librdkafka
        may report those before the failure that caused them); the first purge if there is nothing else."""
        causes = [failure for failure in self.errors if not failure.purged] or self.errors
        return causes[0] if causes else None

    def raise_unproven(self) -> None:
        """Raise :class:`Unproven` if a report failed and not every record reports (rule 3): which record failed
        is not known then."""
        if self.errors and not self.every_record:
            raise Unproven(f"a delivery failed: {self.errors[0].error.str()}")

    def check(self, probe: Callable[[], None]) -> None:
        """While the chunk waits for its deliveries, unless every record reports: raise :class:`Unproven` if the
        transaction failed (a record without a report was refused, and librdkafka holds the records queued behind
        it until the abort, so their reports may never come).  ``probe`` is the producer's ``begin_transaction``:
        inside a transaction it changes nothing and raises either a plain state error or, once the transaction
        failed, the error that failed it (abortable, or fatal)."""
        if self.every_record:
            return
        try:
            probe()
        except KafkaException as raised:
            error = raised.args[0]
            if error.txn_requires_abort() or error.fatal():
                raise Unproven(f"the transaction failed: {error.str()}") from raised

    def runs(self, remote: tuple[str, int]) -> list[OffsetRun]:
        """The offset-sync runs of the chunk's records to ``remote``, once every record was delivered; raises
        :class:`Unproven` if a segment is not proven (rule 2), or, when every record reports, a
        :class:`~airmirror.errors.ReplicationFailure`."""
        builder = RunBuilder()
        for segment in self.segments.get(remote, ()):
            if not segment.proven:
                unproven = f"the deliveries to {remote[0]}-{remote[1]} do not prove where each record went"
                if self.every_record:
                    raise ReplicationFailure(f"{unproven}: a record was produced and not delivered")
                raise Unproven(unproven)
            assert segment.first is not None
            downstream = segment.first
            for start, stop in segment.sources:
                builder.add_run(start, downstream, stop - start)
                downstream += stop - start
        return builder.take()
