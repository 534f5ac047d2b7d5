"""The delivery reports of a chunk and the offset-sync runs they prove (replication/spark/deliveries.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from airmirror.errors import ReplicationFailure
from airmirror.model import OffsetRun
from airmirror.replication.offset_runs import RunBuilder
from airmirror.replication.spark.deliveries import ChunkDeliveries, DeliveryFailure, Unproven, source_runs

REMOTE = ("a.orders", 0)
RANGE = "orders-0"
PURGED = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue")


def delivery(offset: int, value: bytes = b"v") -> Message:
    return Message(topic=REMOTE[0], partition=REMOTE[1], offset=offset, key=b"k", value=value)


def deliver(reports: list, first: int) -> None:
    """Report each record that carries a report as delivered at ``first`` + its place in produce order."""
    for place, report in enumerate(reports):
        if report is not None:
            report(None, delivery(first + place))


@pytest.mark.proves("deliveries rule 1", "deliveries rule 2")
def test_only_the_first_and_last_record_of_a_segment_report_and_they_prove_its_runs() -> None:
    chunk = ChunkDeliveries()
    offsets = [*range(5, 1005), 1007, 1008]  # a hole: records a transform dropped, or markers in the source
    reports = chunk.reports(REMOTE, RANGE, offsets)
    assert [place for place, report in enumerate(reports) if report is not None] == [0, 1001]

    deliver(reports, 100)
    later = chunk.reports(REMOTE, RANGE, [1009])  # the next round's records continue the run
    deliver(later, 1102)

    assert chunk.runs(REMOTE) == [OffsetRun(5, 1010, 100, holes=(1005, 1007))]
    assert chunk.runs(("a.orders", 1)) == []


def test_a_round_whose_records_were_all_dropped_writes_nothing_and_leaves_the_chunk_proven() -> None:
    chunk = ChunkDeliveries()
    deliver(chunk.reports(REMOTE, RANGE, [3, 4]), 20)
    assert chunk.reports(REMOTE, RANGE, []) == []

    assert chunk.runs(REMOTE) == [OffsetRun(3, 5, 20)]


@pytest.mark.proves("deliveries rule 3")
def test_a_record_of_another_writer_between_a_segments_records_leaves_it_unproven() -> None:
    chunk = ChunkDeliveries()
    reports = chunk.reports(REMOTE, RANGE, list(range(10)))
    reports[0](None, delivery(100))
    reports[-1](None, delivery(110))  # 11 offsets for 10 records

    with pytest.raises(Unproven, match=r"a\.orders-0"):
        chunk.runs(REMOTE)


@pytest.mark.proves("deliveries rule 3")
def test_a_segment_whose_last_report_is_missing_is_unproven() -> None:
    chunk = ChunkDeliveries()
    reports = chunk.reports(REMOTE, RANGE, [3, 4])
    reports[0](None, delivery(7))

    with pytest.raises(Unproven):
        chunk.runs(REMOTE)


def test_a_failed_report_is_unproven_unless_every_record_reports() -> None:
    chunk = ChunkDeliveries()
    reports = chunk.reports(REMOTE, RANGE, [41, 42, 43])
    reports[-1](KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"), delivery(-1))

    with pytest.raises(Unproven, match="too large"):
        chunk.raise_unproven()


@pytest.mark.proves("deliveries rule 3")
def test_every_record_reports_after_an_unproven_chunk_and_its_runs_break_where_the_target_skips() -> None:
    chunk = ChunkDeliveries(every_record=True)
    reports = chunk.reports(REMOTE, RANGE, [5, 6, 7, 9])
    assert all(report is not None for report in reports)
    for report, downstream in zip(reports, [100, 101, 103, 104], strict=True):  # another writer's record at 102
        report(None, delivery(downstream))

    chunk.raise_unproven()  # nothing failed
    assert chunk.runs(REMOTE) == [OffsetRun(5, 7, 100), OffsetRun(7, 10, 103, holes=(8, 9))]


@pytest.mark.proves("deliveries rule 4")
def test_when_every_record_reports_the_refused_record_is_named_not_the_records_purged_before_its_report() -> None:
    """librdkafka purges the records queued behind a refused in-flight record and may report them first."""
    chunk = ChunkDeliveries(every_record=True)
    reports = chunk.reports(REMOTE, RANGE, [41, 42, 43, 44])
    chunk.logged(PURGED, delivery(-1))  # a batch-log record
    for report in reports[1:]:
        report(PURGED, delivery(-1))
    assert chunk.cause() == DeliveryFailure(None, None, PURGED, 2)  # nothing else reported yet
    refused = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large")
    reports[0](refused, delivery(-1, value=b"x" * 99))

    assert chunk.cause() == DeliveryFailure(RANGE, 41, refused, 100)
    chunk.raise_unproven()  # every record reports: the caller raises the cause


def test_a_transaction_found_failed_while_waiting_is_unproven_and_not_probed_when_every_record_reports() -> None:
    def raising(error: KafkaError) -> Callable[[], None]:
        def begin_transaction() -> None:
            raise KafkaException(error)

        return begin_transaction

    failed = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "current transaction must be aborted", txn_requires_abort=True)
    in_transaction = KafkaError(KafkaError._STATE, "Operation not valid in state InTransaction")

    with pytest.raises(Unproven, match="must be aborted"):
        ChunkDeliveries().check(raising(failed))
    ChunkDeliveries().check(raising(in_transaction))
    ChunkDeliveries(every_record=True).check(raising(failed))


def test_a_record_that_never_reported_when_every_record_reports_fails_the_chunk() -> None:
    chunk = ChunkDeliveries(every_record=True)
    chunk.reports(REMOTE, RANGE, [1])

    with pytest.raises(ReplicationFailure, match="produced and not delivered"):
        chunk.runs(REMOTE)


@pytest.mark.parametrize(
    ("offsets", "runs"),
    [
        ([], []),
        ([7], [(7, 8)]),
        (list(range(3, 9)), [(3, 9)]),
        ([1, 2, 4, 5, 9], [(1, 3), (4, 6), (9, 10)]),
    ],
)
def test_source_offsets_become_runs_of_consecutive_offsets(offsets: list[int], runs: list[tuple[int, int]]) -> None:
    assert source_runs(offsets) == runs


def test_a_run_added_in_one_step_equals_its_pairs_added_one_by_one() -> None:
    one_by_one, in_steps = RunBuilder(), RunBuilder()
    for up, down in [(5, 10), (6, 11), (7, 12), (9, 13), (10, 14), (20, 30)]:
        one_by_one.add(up, down)
    for up, down, count in [(5, 10, 3), (9, 13, 2), (20, 30, 1)]:
        in_steps.add_run(up, down, count)

    assert in_steps.take() == one_by_one.take()
