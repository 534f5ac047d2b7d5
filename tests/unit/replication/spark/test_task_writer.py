"""The chunk-transaction loop of a copy task (:mod:`airmirror.replication.spark.task_writer`), run against in-memory
stand-ins of the source and target clusters (``conftest.py``): what one chunk transaction holds, the bounds that
end it, what fencing, a failed delivery, a timed-out commit and an abortable error leave behind, and where a
retry resumes.  The real-broker tests (tests/integration) check the same against Kafka."""

from __future__ import annotations

from dataclasses import replace

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import AccessScope
from airmirror.model import OffsetRun
from airmirror.replication.spark import range_reader
from airmirror.replication.spark.batch_log import Progress, decode_runs, encode_job
from airmirror.replication.spark.deliveries import ChunkDeliveries
from airmirror.replication.spark.range_reader import OPEN_END
from airmirror.replication.spark.task_buffer import TaskBuffer
from airmirror.replication.spark.task_writer import (
    CATCH_UP_SILENCE_S,
    CopyTask,
    RangeTask,
    TransactionBounds,
    delivery_failure,
    run_attempt,
)
from tests.unit.kafka_stand_ins import Clock, StandInCluster, Transaction, abortable, timed_out

TOPIC, REMOTE = "orders", "a.orders"
TIDS = ("airmirror-a-b-~copy0", "airmirror-a-b-~copy0~1")
"""The task's two producers' ids: the first writes chunks 1, 3, ..., the second chunks 2, 4, ..."""
GROUP = "airmirror-eos-a-b"
LOG = "airmirror-batches.a.internal"
JOB = "7-newest"


def commit_job(target: StandInCluster, job: str) -> None:
    """What the driver does before it runs a job's tasks: commit the job's token as the flow's newest
    (task_writer rule 3)."""
    target.groups.setdefault(GROUP, {})[(LOG, 0)] = TopicPartition(LOG, 0, 0, metadata=encode_job(job))


@pytest.fixture(autouse=True)
def newest_job(target: StandInCluster) -> None:
    """The driver committed :data:`JOB` as the flow's newest copy job before it ran the tasks."""
    commit_job(target, JOB)


def lose_anchors(target: StandInCluster) -> None:
    """The anchor group expired or was deleted (that never means "not copied"); the retry that follows is one of the
    next job, whose driver commits its token again (task_writer rule 3)."""
    target.groups.clear()
    commit_job(target, JOB)


ROOMY = TransactionBounds(max_records=1000, max_bytes=1 << 30, max_seconds=600.0)


def range_task(partition: int = 0, start: int = 0, end: int = 10, **changes: object) -> RangeTask:
    planned = RangeTask(
        topic=TOPIC,
        partition=partition,
        start=start,
        end=end,
        remote_topic=REMOTE,
        source_topic_id="src1",
        remote_topic_id="dst1",
        resets=False,
        start_epoch=None,
        known=None,
    )
    return replace(planned, **changes)  # type: ignore[arg-type]


def task_of(
    *ranges: RangeTask, bounds: TransactionBounds = ROOMY, batch_id: int = 7, producer: dict[str, object] | None = None
) -> CopyTask:
    return CopyTask(
        flow="a->b",
        batch_id=batch_id,
        transactional_ids=TIDS,
        anchor_group=GROUP,
        log_topic=LOG,
        log_end=0,
        scan_from=0,
        job=JOB,
        bounds=bounds,
        ranges=ranges or (range_task(),),
        source_access=AccessScope("a", "User:mirror", ()),
        target_access=AccessScope("b", "User:mirror", ()),
        buffer=TaskBuffer(),
        producer_config=dict(producer or {}),
        target_consumer_config={},
        target_admin_config={},
        source_consumer_config={},
    )


def by_records(count: int) -> TransactionBounds:
    return replace(ROOMY, max_records=count)


def written(cluster: StandInCluster, transaction: Transaction, topic: str) -> list[Message]:
    """The records ``transaction`` wrote to partition 0 of ``topic``, in offset order."""
    log = cluster.log(topic, 0)
    found = [log[offset].message for t, _, offset in transaction.records if t == topic]
    return [message for message in found if message is not None]


def log_values(cluster: StandInCluster, transaction: Transaction, kind: bytes) -> list[bytes]:
    """The values of the batch-log records of ``kind`` (``b"progress-"``, ``b"runs-"``) ``transaction`` wrote."""
    return [m.value() or b"" for m in written(cluster, transaction, LOG) if (m.key() or b"").startswith(kind)]


def progress_in(cluster: StandInCluster, transaction: Transaction) -> list[Progress | None]:
    return [Progress.decode(value) for value in log_values(cluster, transaction, b"progress-")]


def runs_in(cluster: StandInCluster, transaction: Transaction) -> list[OffsetRun]:
    return [run for value in log_values(cluster, transaction, b"runs-") for run in decode_runs(value).runs]


def copied(cluster: StandInCluster, partition: int = 0) -> list[tuple[bytes | None, bytes | None]]:
    """What a read_committed consumer of the remote partition reads: (key, value) in order."""
    return [(m.key(), m.value()) for m in cluster.committed_records(REMOTE, partition)]


def sources(cluster: StandInCluster, partition: int = 0) -> list[tuple[bytes | None, bytes | None]]:
    return [(m.key(), m.value()) for m in cluster.committed_records(TOPIC, partition)]


def anchor(cluster: StandInCluster, partition: int = 0) -> Progress | None:
    committed = cluster.groups.get(GROUP, {}).get((REMOTE, partition))
    return None if committed is None else Progress.decode(committed.metadata)


def copy_ten_records_in_chunks_of_four(source: StandInCluster) -> None:
    """Copy ten source records, one per poll, in chunks of at most four records: three chunks."""
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    run_attempt(task_of(bounds=by_records(4)), first_attempt=True)


@pytest.mark.proves("task_writer rule 9", "batch_log rules 1-4")
def test_a_chunk_commits_its_records_runs_progress_and_anchor_in_one_transaction(
    source: StandInCluster, target: StandInCluster
) -> None:
    copy_ten_records_in_chunks_of_four(source)

    chunks = target.committed()
    assert [len(written(target, chunk, REMOTE)) for chunk in chunks] == [4, 4, 2]
    for number, chunk in enumerate(chunks):
        (progress,) = progress_in(target, chunk)
        assert progress is not None and (progress.batch_id, progress.chunk) == (7, number)
        downstream = [m.offset() or 0 for m in written(target, chunk, REMOTE)]
        assert runs_in(target, chunk) == [OffsetRun(number * 4, progress.position, downstream[0])]
        assert progress.downstream_position == downstream[-1] + 1
        (sent,) = chunk.offsets[GROUP]
        assert (sent.topic, sent.partition, sent.offset) == (REMOTE, 0, progress.downstream_position)
        assert Progress.decode(sent.metadata) == progress
    assert [p.position for c in chunks for p in progress_in(target, c) if p] == [4, 8, 10]
    assert [p.done for c in chunks for p in progress_in(target, c) if p] == [False, False, True]
    assert [p.downstream_position for c in chunks for p in progress_in(target, c) if p] == [4, 9, 12]  # markers
    assert anchor(target) == progress_in(target, chunks[-1])[0]


@pytest.mark.proves("task_writer rule 10")
def test_the_two_producers_take_turns_and_a_chunk_begins_only_once_the_one_before_it_committed(
    source: StandInCluster, target: StandInCluster
) -> None:
    copy_ten_records_in_chunks_of_four(source)

    assert [t.transactional_id for t in target.committed()] == [TIDS[0], TIDS[1], TIDS[0]]
    turns = [call for call in target.calls if call[1] in ("begin_transaction", "commit_transaction")]
    assert turns == [
        (tid, method) for tid in (*TIDS, TIDS[0]) for method in ("begin_transaction", "commit_transaction")
    ]
    assert [call for call in target.calls if call[1] == "init_transactions"] == [(t, "init_transactions") for t in TIDS]


@pytest.mark.proves("task_writer rule 5")
def test_the_target_gets_each_committed_source_record_once_in_order_with_its_headers_and_timestamp(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.append(TOPIC, 0, b"a", b"1", headers=[("h", b"x")], timestamp=5_000)
    source.skip(TOPIC, 0, 2)  # an aborted record and its marker: never copied
    source.append(TOPIC, 0, None, b"2", timestamp=-1)
    source.append(TOPIC, 0, b"c", None, timestamp=7_000)

    run_attempt(task_of(range_task(end=5)), first_attempt=True)

    got = target.committed_records(REMOTE, 0)
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got] == [
        (b"a", b"1", [("h", b"x")], 5_000),
        (None, b"2", None, 0),  # no source timestamp: the produce time
        (b"c", None, None, 7_000),
    ]
    (chunk,) = target.committed()
    assert runs_in(target, chunk) == [OffsetRun(0, 5, 0, holes=(1, 3))]


@pytest.mark.parametrize(
    ("bounds", "producer", "sizes"),
    [
        (by_records(3), {}, [3, 3, 3, 1]),
        (replace(ROOMY, max_bytes=30), {}, [3, 3, 3, 1]),  # 12 bytes of key and value each
        (replace(ROOMY, max_seconds=2.5), {}, [4, 4, 2]),  # a poll a second; the first record starts the clock
        (ROOMY, {"transaction.timeout.ms": 7_500}, [4, 4, 2]),  # at most a third of the transaction timeout
    ],
    ids=["records", "bytes", "seconds", "transaction-timeout"],
)
@pytest.mark.proves("task_writer rule 5")
def test_a_chunk_ends_at_the_first_bound_its_records_reach(
    source: StandInCluster,
    target: StandInCluster,
    bounds: TransactionBounds,
    producer: dict[str, object],
    sizes: list[int],
) -> None:
    source.records_per_poll, source.seconds_per_poll = 1, 1.0
    source.fill(TOPIC, 0, 10)

    run_attempt(task_of(bounds=bounds, producer=producer), first_attempt=True)

    assert [len(written(target, chunk, REMOTE)) for chunk in target.committed()] == sizes
    assert copied(target) == sources(source)


@pytest.mark.proves("task_writer rule 5")
def test_the_bounds_are_checked_between_polls_and_hold_for_all_ranges_together(
    source: StandInCluster, target: StandInCluster
) -> None:
    for partition in (0, 1):
        source.fill(TOPIC, partition, 10)

    run_attempt(task_of(range_task(0), range_task(1), bounds=by_records(4)), first_attempt=True)

    (chunk,) = target.committed()  # one poll brought all 20 records
    assert chunk.partitions() == [(REMOTE, 0), (REMOTE, 1), (LOG, 0)]
    assert len(progress_in(target, chunk)) == 2 and len(chunk.offsets[GROUP]) == 2


@pytest.mark.proves("task_writer rule 12")
def test_a_range_with_no_committed_record_left_is_marked_done_in_a_chunk_without_records(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.skip(TOPIC, 0, 3)  # aborted records and their marker only

    run_attempt(task_of(range_task(end=3)), first_attempt=True)

    (chunk,) = target.committed()
    assert written(target, chunk, REMOTE) == [] and runs_in(target, chunk) == []
    (progress,) = progress_in(target, chunk)
    assert progress is not None
    assert (progress.position, progress.done, progress.records, progress.downstream_position) == (3, True, 0, 0)
    assert progress.first_runs_offset is None and anchor(target) == progress


def fail_in_the_second_chunk(target: StandInCluster, how: str) -> None:
    """Make the second chunk transaction of a task fail ``how``."""
    if how == "fenced":
        target.before("commit_transaction", lambda: target.fence(TIDS[1]), at=2)
    elif how == "fenced-on-send-offsets":
        target.before("send_offsets_to_transaction", lambda: target.fence(TIDS[1]), at=2)
    elif how == "producer-fenced":
        target.fail("commit_transaction", KafkaError(KafkaError.PRODUCER_FENCED, "fenced", fatal=True), at=2)
    elif how == "commit-timeout":
        target.fail("commit_transaction", timed_out(), at=2)
    elif how == "abortable":
        target.fail("send_offsets_to_transaction", abortable(), at=2)


FAILURES = ["fenced", "fenced-on-send-offsets", "producer-fenced", "commit-timeout", "abortable"]


@pytest.mark.parametrize("how", FAILURES)
@pytest.mark.proves("task_writer rule 11")
def test_a_failure_in_a_chunk_fails_the_task_and_commits_nothing_of_that_chunk(
    source: StandInCluster, target: StandInCluster, how: str
) -> None:
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    fail_in_the_second_chunk(target, how)

    with pytest.raises(KafkaException) as raised:
        run_attempt(task_of(bounds=by_records(4)), first_attempt=True)

    assert copied(target) == sources(source)[:4]
    assert len(target.committed()) == 1
    assert [t.state == "committed" for t in target.transactions] == [True, False]
    progress = anchor(target)
    assert progress is not None and (progress.position, progress.done) == (4, False)
    error = raised.value.args[0]
    if how.startswith("fenced") or how == "producer-fenced":
        assert error.fatal() and target.calls[-1] == (TIDS[1], "abort_transaction")  # tried, and refused
    else:
        assert not error.fatal() and target.called("abort_transaction") == 1


@pytest.mark.parametrize("how", FAILURES)
@pytest.mark.proves("task_writer rule 11")
def test_a_retry_after_a_failure_continues_after_the_last_committed_chunk_and_copies_each_record_once(
    source: StandInCluster, target: StandInCluster, how: str
) -> None:
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    fail_in_the_second_chunk(target, how)
    task = task_of(bounds=by_records(4))
    with pytest.raises(KafkaException):
        run_attempt(task, first_attempt=True)

    run_attempt(task, first_attempt=False)

    assert copied(target) == sources(source)
    assert (TOPIC, 0, 4) in source.consumers[-1].assignments  # the retry read from the committed position
    progress = anchor(target)
    assert progress is not None and (progress.position, progress.done, progress.records) == (10, True, 10)


@pytest.mark.proves("task_writer rule 11")
def test_a_commit_the_broker_made_before_its_answer_timed_out_is_not_copied_again(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    target.fail("commit_transaction", timed_out(), at=2, applied=True)
    task = task_of(bounds=by_records(4))
    with pytest.raises(KafkaException):
        run_attempt(task, first_attempt=True)
    assert copied(target) == sources(source)[:8]

    run_attempt(task, first_attempt=False)

    assert copied(target) == sources(source)
    assert (TOPIC, 0, 8) in source.consumers[-1].assignments


@pytest.mark.proves("task_writer rule 2")
def test_a_zombie_attempt_fenced_by_its_retry_commits_nothing_more(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    task = task_of(bounds=by_records(4))
    target.before("commit_transaction", lambda: run_attempt(task, first_attempt=False), at=2)

    with pytest.raises(KafkaException) as raised:
        run_attempt(task, first_attempt=True)

    assert raised.value.args[0].code() == KafkaError._FENCED
    assert copied(target) == sources(source)
    zombie_chunk = target.transactions[1]
    assert zombie_chunk.state == "aborted" and len(written(target, zombie_chunk, REMOTE)) == 4


@pytest.mark.proves("task_writer rule 4")
def test_a_retry_without_anchors_finds_its_progress_in_the_batch_log(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    fail_in_the_second_chunk(target, "commit-timeout")
    task = task_of(bounds=by_records(4))
    with pytest.raises(KafkaException):
        run_attempt(task, first_attempt=True)
    lose_anchors(target)

    run_attempt(task, first_attempt=False)

    assert copied(target) == sources(source)


@pytest.mark.proves("task_writer rule 4")
def test_a_first_attempt_without_an_anchor_starts_where_the_driver_found_the_range(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.fill(TOPIC, 0, 10)
    found = Progress(
        batch_id=7,
        chunk=0,
        start=0,
        end=10,
        position=6,
        done=False,
        records=6,
        bytes=72,
        downstream_start=0,
        downstream_position=6,
        first_runs_offset=0,
        source_topic_id="src1",
        remote_topic_id="dst1",
    )
    target.fill(REMOTE, 0, 6)  # what the earlier attempt copied

    run_attempt(task_of(range_task(known=found)), first_attempt=True)

    assert copied(target) == sources(source)
    progress = anchor(target)
    assert progress is not None and (progress.chunk, progress.records, progress.done) == (1, 10, True)


@pytest.mark.proves("task_writer rule 4")
def test_ranges_this_batch_finished_are_neither_read_nor_written_again(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.fill(TOPIC, 0, 10)
    task = task_of()
    run_attempt(task, first_attempt=True)
    transactions = len(target.transactions)

    run_attempt(task, first_attempt=False)

    assert len(target.transactions) == transactions
    assert copied(target) == sources(source)
    assert source.consumers[-1].positions == {}


@pytest.mark.parametrize("newest", ["8-later", None], ids=["a-later-job", "no-token"])
@pytest.mark.proves("task_writer rule 3")
def test_an_attempt_of_a_superseded_job_writes_nothing(
    source: StandInCluster, target: StandInCluster, newest: str | None
) -> None:
    """A later job's driver committed its own token (or the anchor group lost it): an attempt of this job that
    starts now, under an id the later job may not use or fence, fails having written nothing, and without fencing
    the producer of the later job that may share its id."""
    source.fill(TOPIC, 0, 10)
    if newest is None:
        target.groups.clear()
    else:
        commit_job(target, newest)

    with pytest.raises(ReplicationFailure, match="was superseded"):
        run_attempt(task_of(), first_attempt=False)

    assert target.called("init_transactions") == 0  # it did not even fence the newer job's attempt of its id
    assert target.called("begin_transaction") == 0
    assert copied(target) == []


@pytest.mark.proves("task_writer rule 3")
def test_an_attempt_superseded_while_it_fences_writes_nothing(source: StandInCluster, target: StandInCluster) -> None:
    """The later job's driver commits its token between this attempt's first look and its init_transactions: the
    look after init_transactions sees it, and the attempt writes nothing."""
    source.fill(TOPIC, 0, 10)
    target.before("init_transactions", lambda: commit_job(target, "8-later"))

    with pytest.raises(ReplicationFailure, match="superseded by job 8-later"):
        run_attempt(task_of(), first_attempt=True)

    assert target.called("begin_transaction") == 0
    assert copied(target) == []


@pytest.mark.proves("task_writer rule 4")
def test_a_target_ahead_of_the_metadata_db_fails_the_task_before_anything_is_written(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.fill(TOPIC, 0, 20)
    run_attempt(task_of(range_task(end=10), batch_id=7), first_attempt=True)
    begun = target.called("begin_transaction")

    with pytest.raises(ReplicationFailure, match="beyond the metadata DB cursor 5"):
        run_attempt(task_of(range_task(start=5, end=20), batch_id=8), first_attempt=True)

    assert target.called("begin_transaction") == begun
    assert copied(target) == sources(source)[:10]


@pytest.mark.proves("task_writer rule 15")
def test_a_stream_commits_records_by_its_time_bound_and_no_empty_chunk_but_the_last(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.seconds_per_poll = 1.0
    source.fill(TOPIC, 0, 3)
    # once the first chunk is written, the read moves past aborted records: only the last chunk records that
    target.before("commit_transaction", lambda: source.skip(TOPIC, 0, 2), at=2)  # the first anchors the range
    stream = range_task(end=2**63 - 1, catch_up=3)
    until = source.clock.time() + 20
    task = replace(task_of(stream, bounds=replace(ROOMY, max_seconds=2.0)), stream_until=until)

    run_attempt(task, first_attempt=True)

    _, *chunks = target.committed()  # the first anchors the range: see the next test
    assert [len(written(target, chunk, REMOTE)) for chunk in chunks] == [3, 0]
    assert [p.position for c in chunks for p in progress_in(target, c) if p] == [3, 5]
    assert not any(p.done for c in chunks for p in progress_in(target, c) if p)
    assert source.clock.time() >= until


@pytest.mark.proves("task_writer rule 17")
def test_a_stream_anchors_its_ranges_without_an_anchor_before_copying_and_only_those(
    source: StandInCluster, target: StandInCluster
) -> None:
    """A partition never written gets an anchor in the stream's first transaction, so the next stream's driver and
    tasks find every partition by its anchor; once all are anchored, a stream commits no transaction without
    records but its last."""
    source.seconds_per_poll = 1.0
    source.fill(TOPIC, 0, 3)
    source.log(TOPIC, 1)  # never written
    ranges = (range_task(end=OPEN_END, catch_up=3), replace(range_task(end=OPEN_END, catch_up=0), partition=1))
    until = source.clock.time() + 5
    first = replace(task_of(*ranges), stream_until=until)

    run_attempt(first, first_attempt=True)

    anchoring = target.committed()[0]
    assert written(target, anchoring, REMOTE) == []
    assert sorted((p.position, p.records) for p in progress_in(target, anchoring) if p) == [(0, 0), (0, 0)]
    assert anchor(target, 0) is not None and anchor(target, 1) is not None
    assert anchor(target, 1).batch_id == 7

    transactions = len(target.committed())
    source.fill(TOPIC, 0, 2)
    second = replace(
        task_of(replace(ranges[0], start=3, catch_up=5), replace(ranges[1], catch_up=0), batch_id=8),
        stream_until=source.clock.time() + 5,
    )
    run_attempt(second, first_attempt=True)

    later = target.committed()[transactions:]
    # No transaction anchors ranges: the records' chunk commits as soon as nothing more is fetched (group commit),
    # and the last one, at stream_until, records where the reads got to.
    assert [len(written(target, chunk, REMOTE)) for chunk in later] == [2, 0]
    assert copied(target) == sources(source)


@pytest.mark.proves("task_writer rule 15")
def test_a_stream_commits_as_soon_as_nothing_more_is_fetched_and_grows_its_chunks_up_to_the_bounds(
    source: StandInCluster, target: StandInCluster
) -> None:
    """Group commit: records fetched poll after poll go in one chunk, committed at the first poll that finds nothing
    more, long before the chunk's time bound; a bound reached first ends the chunk there."""
    source.records_per_poll, source.seconds_per_poll = 2, 1.0
    source.fill(TOPIC, 0, 10)
    stream = (range_task(end=OPEN_END, catch_up=0),)
    start = source.clock.time()
    run_attempt(replace(task_of(*stream), stream_until=start + 60), first_attempt=True)
    chunks = [len(written(target, t, REMOTE)) for t in target.committed()]
    # The anchoring transaction, the records' chunk committed by itself a few polls in (not at the window's end, 60 s
    # away), and the window's last chunk.
    assert chunks == [0, 10, 0], chunks

    source.fill(TOPIC, 0, 10)
    bounded = replace(ROOMY, max_records=4)
    resumed = replace(stream[0], start=10)
    run_attempt(replace(task_of(resumed, bounds=bounded, batch_id=8), stream_until=source.clock.time() + 60), True)
    chunks = [len(written(target, t, REMOTE)) for t in target.committed()[len(chunks) :]]
    assert [n for n in chunks if n] == [4, 4, 2], chunks
    assert copied(target) == sources(source)


@pytest.mark.proves("task_writer rule 14")
def test_a_stream_ends_without_a_read_that_hears_nothing_long_after_its_time(
    source: StandInCluster, target: StandInCluster, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition whose leader is down hears nothing: the stream waits for its catch-up offset only until
    ``CATCH_UP_SILENCE_S`` after ``stream_until``, then ends, the other partition copied and the silent one's progress
    where its read stood (not done), so the window ends and the next stream goes on from there."""
    monkeypatch.setattr(range_reader, "time", clock)  # the reads' silence, on the writer's clock
    source.seconds_per_poll = 1.0
    source.fill(TOPIC, 0, 3)
    source.fill(TOPIC, 1, 5)
    source.offline.add((TOPIC, 1))
    ranges = (range_task(end=OPEN_END, catch_up=3), replace(range_task(end=OPEN_END, catch_up=5), partition=1))
    until = clock.time() + 5
    task = replace(task_of(*ranges), stream_until=until)

    run_attempt(task, first_attempt=True)

    assert clock.time() >= until + CATCH_UP_SILENCE_S
    assert copied(target, 0) == sources(source, 0) and copied(target, 1) == []
    ends = [anchor(target, partition) for partition in (0, 1)]
    assert [(p.position, p.done) for p in ends if p is not None] == [(3, False), (0, False)]


@pytest.mark.proves("task_writer rule 4")
def test_a_retry_looks_up_a_range_without_an_anchor_from_the_batchs_log_floor_only(
    source: StandInCluster, target: StandInCluster
) -> None:
    """A scan for progress starts at the batch's log floor (``scan_from``): what lies below it is older batches'
    and is never read, so the lookup's cost does not grow with the flow's age."""
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    run_attempt(task_of(range_task(end=4), batch_id=6), first_attempt=True)
    floor = len(target.log(LOG, 0))
    fail_in_the_second_chunk(target, "commit-timeout")
    task = replace(task_of(range_task(start=4), bounds=by_records(4)), scan_from=floor)
    with pytest.raises(KafkaException):
        run_attempt(task, first_attempt=True)
    lose_anchors(target)
    consumers = len(target.consumers)

    run_attempt(task, first_attempt=False)

    assert copied(target) == sources(source)
    scans = [offset for c in target.consumers[consumers:] for topic, _, offset in c.assignments if topic == LOG]
    assert scans and min(scans) >= floor > 0


def delivery(topic: str, partition: int, offset: int, value: bytes = b"v") -> Message:
    return Message(topic=topic, partition=partition, offset=offset, key=b"k", value=value)


@pytest.mark.proves("deliveries rule 4")
def test_a_failed_delivery_names_the_topic_it_was_written_to() -> None:
    task = task_of(range_task(0), range_task(1))
    chunk = ChunkDeliveries(every_record=True)
    (report,) = chunk.reports((REMOTE, 1), task.ranges[1], [40])
    report(None, delivery(REMOTE, 1, 7))
    chunk.logged(None, delivery(LOG, 0, 3))
    assert chunk.cause() is None and chunk.runs((REMOTE, 1)) == [OffsetRun(40, 41, 7)]
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed")
    chunk.logged(refused, delivery(LOG, 0, -1))
    (report,) = chunk.reports((REMOTE, 0), task.ranges[0], [40])
    report(refused, delivery(REMOTE, 0, -1))

    failure = chunk.cause()
    assert failure is not None and failure.source_range is None  # the batch log's record failed first
    assert LOG in str(delivery_failure(task, failure))
    assert REMOTE in str(delivery_failure(task, chunk.errors[1]))


def test_a_record_refused_as_too_large_is_named_when_the_next_produce_meets_the_failed_transaction(
    source: StandInCluster, target: StandInCluster
) -> None:
    source.records_per_poll = 1
    source.fill(TOPIC, 0, 10)
    target.refuse(REMOTE, 0, b"k5", KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large"))

    with pytest.raises(ReplicationFailure, match=r"record orders-0@5 \(\d+ bytes .*max\.message\.bytes"):
        run_attempt(task_of(bounds=by_records(4)), first_attempt=True)

    assert copied(target) == sources(source)[:4]
    second = [t.state for t in target.transactions[1:]]
    assert second == ["aborted", "aborted"], "the chunk failed, then failed again reporting every record"


def test_a_record_the_target_refuses_as_too_large_fails_naming_the_record_and_the_settings() -> None:
    task = task_of()
    chunk = ChunkDeliveries(every_record=True)
    (report,) = chunk.reports((REMOTE, 0), task.ranges[0], [41])
    report(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"), delivery(REMOTE, 0, -1, value=b"x" * 99))

    failure = chunk.cause()
    assert failure is not None
    with pytest.raises(
        ReplicationFailure, match=r"record orders-0@41 \(100 bytes .*max\.message\.bytes of topic a\.orders"
    ):
        raise delivery_failure(task, failure)


@pytest.mark.proves("task_writer rule 6", "deliveries rule 3")
def test_a_chunk_whose_delivery_failed_is_copied_again_with_every_record_reporting_and_lands_once(
    source: StandInCluster, target: StandInCluster
) -> None:
    """The failed record had no report of its own: the chunk is aborted and copied again (deliveries rule 3)."""
    source.records_per_poll = 4
    source.fill(TOPIC, 0, 10)
    target.fail_delivery(REMOTE, 0, KafkaError(KafkaError._MSG_TIMED_OUT, "Local: Message timed out"), at=6)

    run_attempt(task_of(bounds=by_records(4)), first_attempt=True)

    assert copied(target) == sources(source)
    assert [t.state for t in target.transactions] == ["committed", "aborted", "committed", "committed"]
    chunks = target.committed()
    firsts = [written(target, chunk, REMOTE)[0].offset() for chunk in chunks]
    assert [runs_in(target, chunk) for chunk in chunks] == [
        [OffsetRun(0, 4, firsts[0])],
        [OffsetRun(4, 8, firsts[1])],  # after the aborted copy's records and marker
        [OffsetRun(8, 10, firsts[2])],
    ]


@pytest.mark.proves("task_writer rule 6")
def test_a_record_of_another_writer_between_a_chunks_records_is_found_and_the_runs_go_around_it(
    source: StandInCluster, target: StandInCluster
) -> None:
    """The first and last reports do not prove the records' offsets: the chunk is copied again, every record
    reporting, and its runs skip the other writer's record."""
    source.records_per_poll = 10
    source.fill(TOPIC, 0, 10)
    target.write_between(REMOTE, 0, at=3)  # in the first copy of the chunk
    target.write_between(REMOTE, 0, at=7 + 6)  # in its second copy (after 7 more of the first), before the sixth

    run_attempt(task_of(), first_attempt=True)

    ours = [record for record in copied(target) if record[0] != b"another writer"]
    assert ours == sources(source)
    assert [t.state for t in target.transactions] == ["aborted", "committed"]
    (chunk,) = target.committed()
    first = written(target, chunk, REMOTE)[0].offset()
    assert runs_in(target, chunk) == [OffsetRun(0, 5, first), OffsetRun(5, 10, first + 6)]


@pytest.mark.proves("task_writer rule 7")
def test_a_remote_topic_recreated_between_two_chunks_fails_the_chunk_before_its_commit(
    source: StandInCluster, target: StandInCluster
) -> None:
    """Rule 3: the first chunk's records end at offset 4 of the remote partition; the topic is deleted and created
    again under its name as the first chunk commits (its marker opens the new log), so the next chunk's first record
    lands at offset 1: that chunk is aborted, naming the topic, and nothing of it is committed to the new
    incarnation."""
    source.records_per_poll = 4
    source.fill(TOPIC, 0, 10)

    def recreate() -> None:
        target.logs[(REMOTE, 0)] = []

    target.before("commit_transaction", recreate, at=1)  # right as the first chunk commits: its records are gone

    with pytest.raises(ReplicationFailure, match=r"remote topic a\.orders .* recreated .* offset 1, below the 4"):
        run_attempt(task_of(bounds=by_records(4)), first_attempt=True)

    assert copied(target) == []
    assert [t.state for t in target.transactions] == ["committed", "aborted"]


@pytest.mark.proves("task_writer rule 7")
def test_a_remote_topic_recreated_and_written_past_the_copy_is_asked_for_its_id_and_never_committed(
    source: StandInCluster, target: StandInCluster
) -> None:
    """Rule 3: the topic is recreated as the first chunk commits, and the new incarnation already holds ten offsets
    (another writer's aborted records), so the next chunk lands above where the copy stood: the cluster is asked for
    the topic's id, which is not the range's, and the chunk is aborted, naming both ids; nothing is committed there."""
    source.records_per_poll = 4
    source.fill(TOPIC, 0, 10)

    def recreate() -> None:
        target.recreate_topic(REMOTE)
        target.skip(REMOTE, 0, 10)

    target.before("commit_transaction", recreate, at=1)

    with pytest.raises(ReplicationFailure, match=r"remote topic a\.orders .* recreated .*\(topic id dst1 -> dst1\+\)"):
        run_attempt(task_of(bounds=by_records(4)), first_attempt=True)

    assert copied(target) == [] and target.described == [[REMOTE], [REMOTE]]  # before each chunk's commit
    assert [t.state for t in target.transactions] == ["committed", "aborted"]


@pytest.mark.proves("task_writer rule 7")
def test_every_chunk_that_wrote_records_asks_for_its_remote_topic_ids_before_it_commits(
    source: StandInCluster, target: StandInCluster
) -> None:
    """Rule 3: neither delivery reports nor offsets tell incarnations apart, so each of the three chunks asks for its
    remote topic's id before its commit, wherever its records landed (here another writer's record lands between the
    first two): the id is the range's, and the copy goes on."""
    source.records_per_poll = 4
    source.fill(TOPIC, 0, 10)
    target.before("commit_transaction", lambda: target.fill(REMOTE, 0, 1), at=1)

    run_attempt(task_of(bounds=by_records(4)), first_attempt=True)

    assert target.described == [[REMOTE], [REMOTE], [REMOTE]]
    assert copied(target)[:4] + copied(target)[5:] == sources(source)
