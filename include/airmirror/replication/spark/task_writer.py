"""Exactly-once copy of one copy task's ranges (many partitions, one range each) into their remote topics.

A batch's ranges are spread over a few copy tasks (:mod:`airmirror.replication.spark.copy_job`).  A task copies
all of its ranges with one source consumer (:class:`~airmirror.replication.spark.range_reader.RangesReader`) and
two transactional producers, so fencing, producers, transactions and offset commits are paid per task, not per
partition.  A task copies ranges of batch N, each source ``topic``/``partition`` offsets ``[start, end)``; the
records it writes to the batch log are :mod:`airmirror.replication.spark.batch_log`'s.  Rules:

1. **Fixed ids.**  The ``transactional.id`` of each of the task's two producers is one of
   ``names.copy_task_transactional_ids(source, target, index)``.  It is the same for every attempt at task
   ``index`` of the job, whichever process, Spark task or Airflow retry runs it, and no other flow uses it.
2. **Fence before reading.**  An attempt calls ``init_transactions()`` on both producers before it reads anything.
   That fences every older attempt at the task (a zombie can no longer commit) and aborts its open transaction,
   so none of its records ever becomes visible to read_committed consumers.
3. **The job token.**  A retried job may spread the partitions differently, so before it starts the driver fences
   every task id of the batch's job before it (:mod:`airmirror.replication.job_driver` rules 1-3).  Before that,
   the driver commits a new job token (:func:`~airmirror.replication.spark.progress.supersede_jobs`), which the
   job's tasks carry (``CopyTask.job``).  Right after ``init_transactions()`` a task reads the flow's newest token
   with its anchors; unless it is its own, the task fails having written nothing.  The fencing stops the attempts
   that were running; the token stops those of an earlier job that start later (a Spark retry in a run that lost
   its lease).  So at most one attempt can commit for a partition at any time, and the tasks of a committed batch
   write nothing more.
4. **Where each range stands.**  After fencing, the task looks up each range's newest committed progress, for all
   anchors in one request (:func:`~airmirror.replication.spark.batch_log.look_up_progress`): a trusted anchor;
   else, on a first attempt, what the driver found just before the job (it fenced every attempt first); else, on
   a retry, a scan of the batch log from the batch's log floor (``CopyTask.scan_from``).
   :func:`~airmirror.replication.spark.standing.range_standing` says what that progress means (:func:`resume_from`):
   done, nothing is read or written; part-copied, the copy continues at its position (the read validates it
   against the leader epoch there); untouched, it starts at ``start``; target ahead, the task fails having written
   nothing, for writing would copy records twice (a metadata DB restored from an old backup).
5. **Chunks.**  The ranges are copied together as a sequence of *chunk* transactions.  A chunk holds the next
   records of every range still being read, each in source order into the same partition of its remote topic
   (same key, value, headers and timestamp, after the flow's transform steps).  It ends at the first of its
   :class:`TransactionBounds`, checked between the reader's polls: records, payload bytes, or time since its first
   record (at most a third of the producer's ``transaction.timeout.ms``).
6. **Runs from delivery reports.**  A chunk's offset-sync runs are proven from the delivery reports of the first
   and the last of each round's records of a range.  Where those do not prove them, the chunk is aborted and copied
   again with a report per record (:mod:`~airmirror.replication.spark.deliveries`).
7. **Remote topic ids before the commit.**  Before a chunk that wrote records commits, the task asks the cluster
   for the ids of the remote topics it wrote to (:meth:`CopyAttempt.verify_incarnations`,
   :mod:`~airmirror.replication.spark.remote_topics`).  librdkafka writes by name, and neither its reports nor their
   offsets tell one incarnation from another (seen in a loaded CI run: a topic recreated under a chunk got its
   40,000 records while the batch recorded the old incarnation's offsets).  A remote topic that is not the
   incarnation the driver found fails the chunk before its commit, and the driver's next round stops the topic
   (:mod:`airmirror.replication.incarnations`); so does a first record landing below where the copy stood.
8. **Bounded memory.**  No per-record state is kept.  What the task buffers (reader prefetch, handed-over records,
   producer queue) stays within ``airmirror.task.max.buffer.bytes``
   (:mod:`airmirror.replication.spark.task_buffer`), whatever the number or length of its ranges.
9. **What a chunk commits.**  In the chunk's transaction, for every range it changed (records copied, a read moved
   past aborted records and markers, or ended): its runs records and its new progress record, then the anchors of
   all of them in one offset commit, then ``commit_transaction()``.  The chunk's first runs record also carries the
   schema ids the task mapped that no committed runs record carries yet (:mod:`airmirror.schemas.record_ids`
   rule 3).  Read_committed consumers of the target see the copy advance chunk by chunk.
10. **Two producers take turns**, one chunk each, so a chunk never waits for the one before it.  A commit returns
    once the coordinator logged it and writes its markers after; until then the coordinator refuses the same id's
    next transaction (CONCURRENT_TRANSACTIONS, retried by librdkafka 20 ms later: measured on a busy broker, a
    tenth to a quarter of a live stream's chunks waited so, the median chunk taking 11 ms).  A producer begins
    its chunk only once the other's commit returned, so one transaction is open at a time, chunks commit in
    order, and a chunk's records follow the previous chunk's in every partition.
11. **A failure aborts only the open chunk**, explicitly or at the next attempt's ``init_transactions()``; the
    committed chunks stay, for every range.
12. **Done.**  A range's progress says ``done`` in the chunk that reaches its end, or the position the read got to
    when the source log moved from under it (:mod:`airmirror.replication.spark.range_reader`).  A range with no
    committed record left to copy is marked done in the chunk where its read ends, with no records.
13. **The DB after Kafka.**  The driver commits the metadata DB (cursors, offset syncs, batch state) in one DB
    transaction only once every range of the batch has done progress for batch N.  If the driver dies first, the
    next run resumes batch N: rule 4 skips the finished ranges and continues the others.
14. **A stream's window** (a live run's stream batch, :mod:`airmirror.replication.streaming`).  The ranges are open
    (``end`` is :data:`~airmirror.replication.spark.range_reader.OPEN_END`), and the task copies until
    ``stream_until`` (wall clock) and at least until every read reached its range's ``catch_up``: what the partition
    held when the job was planned, so a task Spark starts late, or a backlog longer than the window, is copied all
    the same.  A read that heard nothing of its partition for :data:`CATCH_UP_SILENCE_S` after ``stream_until`` (a
    leader down, say) does not hold the stream: its progress stays where its read got to, and the next stream goes
    on from there, so a window always ends.  Transactional calls are bounded by :data:`STREAM_TRANSACTION_CALL_S`
    (:func:`~airmirror.replication.spark.watchdog.hard_deadline`).  Rules 1-11 hold unchanged.
15. **Group commit.**  In a stream, a chunk with records commits as soon as the read has nothing more fetched (an
    empty round right after records, :mod:`~airmirror.replication.spark.range_reader`).  Under light load a record
    waits one fetch and one commit; under load chunks grow while the previous commit runs, up to
    ``airmirror.live.transaction.max.ms`` since their first record.  A chunk without records is never committed,
    except the last one at ``stream_until``, which records where every read got to.
16. **A stream's end.**  In a stream, no range is ``done`` but one whose source log moved from under its read: its
    progress says ``done`` there in the next committed chunk, the other ranges stream on, and the driver ends the
    stream early so that the next one plans the partition again.  The driver ends a stream by fencing the task
    ids; each partition's newest committed progress is then final, at a chunk boundary.
17. **Anchors at a stream's start.**  A stream's reader is opened after fencing, at each range's progress, so it
    never seeks.  The ranges that had no trusted anchor get their progress and anchors committed at once, in a
    transaction of no records (:meth:`CopyAttempt.anchor`), so every partition, one never written included, is
    found by its anchor at the next stream's start, and a lost anchor group costs one bounded lookup.

Hence every source record of a committed range lands in the target exactly once, in order, whatever fails
(a Spark task killed mid-chunk, the job killed between Kafka commit and DB commit, a broker restart, an
expired or deleted anchor group).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, suppress
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from pyspark import TaskContext

from airmirror.config.schema_registries import SchemaIds
from airmirror.config.transforms import Step
from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import AccessScope, named, naming_refusals
from airmirror.kafka.client_log import logged
from airmirror.kafka.clients import NO_TOPIC_CREATION, ClientConfig
from airmirror.model import OffsetRun, RangeCopied
from airmirror.replication.spark.batch_log import (
    Progress,
    decode_job,
    encode_runs,
    job_marker,
    look_up_progress,
    progress_key,
    read_group,
    runs_key,
    runs_parts,
    scan_progress,
    trusted_anchor,
)
from airmirror.replication.spark.deliveries import ChunkDeliveries, DeliveryFailure, Unproven
from airmirror.replication.spark.range_reader import OPEN_END, RangesReader, ReadRange, offset_of
from airmirror.replication.spark.record_codec import Headers, HeaderValue, header_list
from airmirror.replication.spark.record_transforms import RecordTransforms, TransformFailure
from airmirror.replication.spark.remote_topics import RemoteIncarnations, RemoteTopicCheck
from airmirror.replication.spark.standing import Done, Incarnations, PartCopied, TargetAhead, Untouched, range_standing
from airmirror.replication.spark.task_buffer import TaskBuffer, bounded
from airmirror.replication.spark.watchdog import hard_deadline
from airmirror.schemas.avro_fields import AvroFields
from airmirror.schemas.framing import NO_SIDES
from airmirror.schemas.record_ids import IdTranslator, RecordIds
from airmirror.schemas.registry_client import RegistryClient

TRANSACTION_TIMEOUT_MS = 900_000
TRANSACTION_CALL_S = 30.0
STREAM_TRANSACTION_CALL_S = 10.0
"""A streaming task's bound on a chunk's transactional calls: a stream's lag is its users' recovery point, so a
call stuck behind a restarted coordinator ends the worker sooner (its retry fences and continues)."""
CATCH_UP_SILENCE_S = 60.0
"""How long past its ``stream_until`` a stream waits on a read that hears nothing before it ends without it
(rule 14)."""
FLUSH_TIMEOUT_S = 300.0
FLUSH_POLL_S = 0.5
FAILED_DELIVERY_POLLS = 300
"""How many short polls a failed transaction waits for the report that names its refused record (it comes at once
on an idle machine; a two-core CI run with three test workers needed more than the 10 s this once was).  Only a
failing chunk waits."""
FAILED_DELIVERY_POLL_S = 0.1
TOPICS_NAMED = 3  # a refusal names at most this many of a task's remote topics
NO_CHUNK = -1
"""The ``chunk`` of an untouched range's progress: this batch committed no chunk of it, so its first is chunk 0."""
Outgoing = tuple[int, bytes | None, bytes | None, Headers | dict[str, HeaderValue] | None, int]
"""A record to produce: its source offset, key, value, headers and timestamp."""


class ChunkEnd(Enum):
    """Why a chunk ended (rules 5 and 15)."""

    BOUND = "a transaction bound was reached"
    READS_DONE = "every read reached its end"
    FETCHED_ALL = "a stream's records so far, and nothing more fetched: a group commit"
    STREAM_ENDS = "the stream ends"
    READ_STOPPED = "a stream's read stopped: its source log moved from under it"


@dataclass(frozen=True)
class TransactionBounds:
    """When a chunk transaction ends: whichever of these its records reach first (see the module docstring)."""

    max_records: int
    max_bytes: int
    max_seconds: float


@dataclass(frozen=True)
class RangeTask:
    """One range of a copy task: source ``topic``/``partition`` offsets ``[start, end)`` into ``remote_topic``.

    ``source_topic_id``/``remote_topic_id`` name the incarnations the range copies between, ``resets`` says its
    cursor starts afresh (rule 4), ``start_epoch`` is the source leader epoch before
    ``start`` when known, and ``known`` the progress the driver found for it before the job.  A streaming range
    (``end`` is :data:`~airmirror.replication.spark.range_reader.OPEN_END`) has ``catch_up``: the source's last
    stable offset when its job was planned, which its stream copies up to however late the task starts (rule 14).
    ``transforms`` are the flow's transform steps for the remote topic (:mod:`airmirror.config.transforms`; none
    for a heartbeats topic), which the task runs on each record (rule 5)."""

    topic: str
    partition: int
    start: int
    end: int
    remote_topic: str
    source_topic_id: str | None
    remote_topic_id: str | None
    resets: bool
    start_epoch: int | None
    known: Progress | None
    catch_up: int | None = None
    transforms: tuple[Step, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def remote(self) -> tuple[str, int]:
        return (self.remote_topic, self.partition)


@dataclass(frozen=True)
class CopyTask:
    """Everything one Spark task needs to copy its ranges; plain data, so it pickles to executors.

    ``log_end`` is the batch log's end offset before the job: every runs record the job writes lies at or after
    it; ``scan_from`` is the batch's log floor, where a retry looks up a range without a trusted anchor (rule 4).
    ``job`` is the token the driver committed for the job (rule 3): the task writes only while it is the newest.
    ``buffer`` bounds what the task holds (:mod:`airmirror.replication.spark.task_buffer`).  The client
    configurations can hold credentials, so they are left out of the repr.  The access scopes name the ACL
    behind a refusal (:mod:`airmirror.kafka.authorization`).  ``stream_until`` (epoch seconds) makes it a streaming
    task (rule 14).  ``record_ids`` makes the task translate schema ids
    (:mod:`airmirror.schemas.record_ids`).  ``skip_failed_records`` (``errors.tolerance = all``) skips a record a
    transform cannot process instead of failing the chunk, writing it to ``dead_letter_topic`` when there is one
    (:meth:`CopyAttempt.dead_letter`), with Connect's context headers when ``dead_letter_headers``.
    """

    flow: str
    batch_id: int
    transactional_ids: tuple[str, str]
    anchor_group: str
    log_topic: str
    log_end: int
    scan_from: int
    job: str
    bounds: TransactionBounds
    ranges: tuple[RangeTask, ...]
    source_access: AccessScope
    target_access: AccessScope
    buffer: TaskBuffer
    producer_config: ClientConfig = field(repr=False)
    target_consumer_config: ClientConfig = field(repr=False)
    target_admin_config: ClientConfig = field(repr=False)
    source_consumer_config: ClientConfig = field(repr=False)
    stream_until: float | None = None
    record_ids: RecordIds | None = field(default=None, repr=False)
    skip_failed_records: bool = False
    dead_letter_topic: str | None = None
    dead_letter_headers: bool = False

    @property
    def remote_topics(self) -> str:
        """The task's remote topics, as a refusal names them."""
        topics = sorted({r.remote_topic for r in self.ranges})
        more = len(topics) - TOPICS_NAMED
        return ", ".join(topics[:TOPICS_NAMED]) + (f" and {more} more" if more > 0 else "")


def delivery_failure(task: CopyTask, failure: DeliveryFailure) -> Exception:
    """What a failed delivery raises: a record too large for the target names its source offset and size; any other
    failure names the topic it was written to (the batch log, for the log's own records)."""
    source, error = failure.source_range, failure.error
    if source is not None and failure.offset is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        return record_too_large(task, source, failure.offset, failure.size)
    topic = task.log_topic if source is None else source.remote_topic
    return named(task.target_access, KafkaException(error), topic=topic)


def record_too_large(task: CopyTask, source: RangeTask, offset: int, size: int) -> ReplicationFailure:
    target = task.flow.rsplit("->", 1)[-1]
    return ReplicationFailure(
        f"record {source.name}@{offset} ({size} bytes of key and value) is larger than the "
        f"target accepts for {source.remote_topic}: raise max.message.bytes of topic {source.remote_topic} on cluster "
        f"{target} (or of the source topic, when sync.topic.configs.enabled copies it), and "
        f"`{target}.producer.max.request.size` if it is lower (it is 20 MiB unless set, and at most a quarter of "
        "`airmirror.task.max.buffer.bytes`); then run the flow again"
    )


def transform_failed(source: RangeTask, offset: int, failure: TransformFailure) -> ReplicationFailure:
    return ReplicationFailure(
        f"record {source.name}@{offset}: {failure}; nothing of its chunk was written: fix the transform or the "
        "record, or set errors.tolerance = all to skip such records"
    )


def producer_settings(task: CopyTask, transactional_id: str) -> dict[str, Any]:
    """Transactional producer settings: the flow's target producer settings within the task buffer's producer
    limits (:func:`~airmirror.replication.spark.task_buffer.bounded`), plus the EOS invariants and no topic creation.
    Each of the task's two producers gets the whole producer limits: only the one whose turn it is holds records
    (the other's commit flushed its queue, rule 10)."""
    settings: dict[str, Any] = {
        "enable.sparse.connections": False,  # connect to every broker at once: see await_broker_connections
        "linger.ms": 20,
        "batch.size": 1024 * 1024,
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        **bounded(task.producer_config, task.buffer.producer_limits(), "producer"),
    }
    settings.update(
        {
            "transactional.id": transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            **NO_TOPIC_CREATION,
        }
    )
    return settings


def chunk_seconds(task: CopyTask, settings: Mapping[str, Any]) -> float:
    """The time bound of a chunk: the configured one, at most a third of the transaction timeout."""
    return min(task.bounds.max_seconds, int(settings["transaction.timeout.ms"]) / 3000)


class RangeState:
    """One range within an attempt: its newest committed progress and what the open chunk copied of it."""

    def __init__(self, source: RangeTask, progress: Progress, avro: AvroFields | None = None) -> None:
        self.source, self.progress = source, progress
        transforms = source.transforms
        self.transforms = (
            RecordTransforms(transforms, source.remote_topic, source.partition, avro) if transforms else None
        )
        self.chunk_records = self.chunk_bytes = self.chunk_passed = self.chunk_filtered = self.chunk_skipped = 0

    def start_chunk(self) -> None:
        """Count the next chunk from nothing (after a commit, or an abort)."""
        self.chunk_records = self.chunk_bytes = self.chunk_passed = self.chunk_filtered = self.chunk_skipped = 0


class CopyAttempt:
    """One attempt at one copy task: fence, find every range's progress, copy the rest chunk by chunk.  Leaving it as
    a context manager closes its registry clients, whether the attempt copied everything or failed."""

    def __init__(self, task: CopyTask) -> None:
        self.task = task
        self.deliveries = ChunkDeliveries()
        """The reports of the open chunk (:mod:`~airmirror.replication.spark.deliveries`)."""
        self.every_record = False
        """Whether every record reports: after a chunk whose reports did not prove its runs (deliveries rule 3)."""
        self.rounds: Iterator[dict[tuple[str, int], list[Message]]] = iter(())
        """The reader's rounds the chunks take their records from."""
        settings = [producer_settings(task, i) for i in task.transactional_ids]
        self.max_seconds = chunk_seconds(task, settings[0])
        self.producers = [Producer(logged(each)) for each in settings]
        self.turn = 0
        """Which of :attr:`producers` writes the next transaction (rule 10)."""
        self.remotes = RemoteTopicCheck(self.producers[0], [r.remote_topic for r in task.ranges], task.flow)
        self.incarnations = RemoteIncarnations(
            task.target_admin_config, {r.remote_topic: r.remote_topic_id for r in task.ranges}, task.flow
        )
        self.group_metadata = anchor_group_metadata(task)
        self.states: dict[tuple[str, int], RangeState] = {}
        self.call_s = TRANSACTION_CALL_S if task.stream_until is None else STREAM_TRANSACTION_CALL_S
        self.ids = None if task.record_ids is None else IdTranslator(task.record_ids)
        record_ids = task.record_ids
        self.avro = (
            AvroFields(
                RegistryClient(record_ids.source),
                RegistryClient(record_ids.target),
                derives=record_ids.mode is SchemaIds.TRANSLATE,
            )
            if record_ids is not None and any(step.fields for r in task.ranges for step in r.transforms)
            else None
        )
        """The registries of field transforms on Avro sides (:mod:`airmirror.schemas.avro_fields`)."""
        self.carried_ids: set[int] = set()
        """The schema ids this attempt mapped that a committed runs record carries (rule 9)."""

    def __enter__(self) -> CopyAttempt:
        return self

    def __exit__(self, *_: object) -> None:
        """Close the attempt's registry clients, whether it copied everything or failed."""
        if self.ids is not None:
            self.ids.close()
        if self.avro is not None:
            self.avro.close()

    @property
    def producer(self) -> Producer:
        """The producer whose turn it is."""
        return self.producers[self.turn]

    @property
    def transactional_id(self) -> str:
        """The transactional id of :attr:`producer`."""
        return self.task.transactional_ids[self.turn]

    def fence(self, first_attempt: bool) -> None:
        """Fence older attempts and find where each range stands (rules 2-4).  The job's
        token is checked before ``init_transactions()`` too, so that an attempt of a superseded job does not even
        fence the attempt of the newer job that shares its id."""
        task = self.task
        marker = job_marker(task.log_topic)
        self.check_job(read_group(task.target_consumer_config, task.anchor_group, [marker]), marker)
        for producer, transactional_id in zip(self.producers, task.transactional_ids, strict=True):
            await_broker_connections(producer, task.ranges[0].remote_topic)
            with hard_deadline(TRANSACTION_CALL_S, f"init_transactions of {transactional_id}"):
                producer.init_transactions(TRANSACTION_CALL_S)
        remotes = {r.remote: r for r in task.ranges}
        committed = read_group(task.target_consumer_config, task.anchor_group, [*remotes, marker])
        self.check_job(committed, marker)
        anchors = {
            (tp.topic, tp.partition): trusted_anchor(tp) for tp in committed if (tp.topic, tp.partition) != marker
        }
        unanchored = [remote for remote, anchor in anchors.items() if anchor is None]

        def scan(missing: list[tuple[str, int]]) -> dict[tuple[str, int], Progress | None]:
            sources = {remote: (remotes[remote].topic, remotes[remote].partition) for remote in missing}
            return scan_progress(task.target_consumer_config, task.log_topic, task.flow, sources, task.scan_from)

        known = {remote: r.known for remote, r in remotes.items()} if first_attempt else None
        found = look_up_progress(anchors, known=known, scan=scan)
        for remote, source in remotes.items():
            progress = resume_from(task.batch_id, source, found[remote])
            self.states[(source.topic, source.partition)] = RangeState(source, progress, self.avro)
        if task.stream_until is not None and unanchored:
            self.anchor([(remotes[remote].topic, remotes[remote].partition) for remote in unanchored])

    def check_job(self, committed: list[TopicPartition], marker: tuple[str, int]) -> None:
        """Fail, having written nothing, unless the flow's newest job token (in ``committed``, at ``marker``) is this
        task's (rule 3)."""
        task = self.task
        newest = next((decode_job(tp.metadata) for tp in committed if (tp.topic, tp.partition) == marker), None)
        if newest != task.job:
            raise ReplicationFailure(
                f"copy job {task.job} of flow {task.flow} was superseded by "
                f"{'job ' + newest if newest else 'a job whose token is gone'}: {task.transactional_ids[0]} writes "
                "nothing (the run that started it lost the flow, or was stopped)"
            )

    def anchor(self, keys: list[tuple[str, int]]) -> None:
        """Commit the progress of these ranges as it stands, with their anchors, in a transaction of no records
        (rule 17)."""
        self.producer.begin_transaction()
        try:
            self.commit_progress({key: self.states[key].progress for key in keys})
        except BaseException:
            abort_quietly(self.producer)
            raise

    def copy(self, reader: RangesReader) -> None:
        """Copy every range from its progress on (call :meth:`fence` first), until each is done."""
        for key, state in self.states.items():
            progress = state.progress
            if progress.done:
                reader.drop(*key)
            elif progress.position != state.source.start:
                reader.seek(*key, progress.position, progress.leader_epoch)
        self.rounds = reader.rounds()
        while not all(state.progress.done for state in self.states.values()):
            self.copy_chunk(reader)

    def stream_reads(self) -> list[ReadRange]:
        """The open reads of a streaming task, each from its range's progress (call :meth:`fence` first)."""
        return [
            ReadRange(
                state.source.topic,
                state.source.partition,
                state.progress.position,
                OPEN_END,
                state.progress.leader_epoch,
            )
            for state in self.states.values()
        ]

    def stream(self, reader: RangesReader, until: float) -> None:
        """Copy chunk after chunk until ``until`` (epoch seconds; rule 14), from a reader of :meth:`stream_reads`."""
        self.rounds = reader.rounds()
        while not self.stream_ends(reader, until):
            self.copy_chunk(reader, until)

    def stream_ends(self, reader: RangesReader, until: float) -> bool:
        """Whether a stream may end now: ``until`` has passed and every read has caught up or has heard nothing for
        :data:`CATCH_UP_SILENCE_S` since ``until``, or every read ended (rules 14 and 16)."""
        reads = reader.reads
        if reader.ended and all(read.done for read in reads.values()):
            return True
        now = time.time()
        if now < until:
            return False
        waited = now - until >= CATCH_UP_SILENCE_S
        return all(
            (read := reads.get(key)) is None
            or read.done
            or read.reached >= (state.source.catch_up or 0)
            or (waited and read.silent_for(CATCH_UP_SILENCE_S))
            for key, state in self.states.items()
        )

    def newly_stopped(self, reader: RangesReader) -> bool:
        """Whether a stream's read ended (its source log diverged below it, rule 16) and its progress does not say
        so yet: the chunk then ends and commits, so the driver learns it at once."""
        return any(not self.states[key].progress.done for key in reader.ended)

    def copy_chunk(self, reader: RangesReader, until: float | None = None) -> None:
        """One chunk transaction (rule 5); with ``until``, one chunk of a stream (rule 15).  A chunk whose delivery
        reports do not prove where its records went is aborted and copied again, every record reporting, as is
        every later chunk of the attempt (:mod:`~airmirror.replication.spark.deliveries` rule 3)."""
        try:
            self.chunk_transaction(reader, until)
        except Unproven:
            self.every_record = True
            self.rewind(reader)
            self.chunk_transaction(reader, until)

    def rewind(self, reader: RangesReader) -> None:
        """After an aborted chunk: read every range not done again from its committed progress."""
        for key, state in self.states.items():
            if key in reader.reads and not state.progress.done:
                reader.seek(*key, state.progress.position, state.progress.leader_epoch)
            state.start_chunk()
        self.rounds = reader.rounds()

    def chunk_transaction(self, reader: RangesReader, until: float | None) -> None:
        """The transaction of :meth:`copy_chunk`, aborted on any failure: filled (:meth:`fill_chunk`), flushed, and
        committed unless it is a stream's chunk that holds nothing to say (no record, no end, no stopped read)."""
        producer = self.producer
        self.deliveries = ChunkDeliveries(self.every_record)
        producer.begin_transaction()
        try:
            end, records = self.fill_chunk(reader, until)
            self.flush()
            if until is None or records or end is ChunkEnd.STREAM_ENDS or self.newly_stopped(reader):
                self.commit_chunk(reader)
        except BaseException:
            abort_quietly(producer)
            raise

    def fill_chunk(self, reader: RangesReader, until: float | None) -> tuple[ChunkEnd, int]:
        """Produce the next records of every range into the open transaction until the chunk ends; returns why it
        ended (:class:`ChunkEnd`, a stream's only with ``until``) and how many records it holds."""
        bounds = self.task.bounds
        records = copied_bytes = 0
        first_record_at: float | None = None
        for got in self.rounds:
            for key, messages in got.items():
                state = self.states[key]
                copied = self.produce_records(state, messages)
                state.chunk_bytes += copied
                records += len(messages)
                copied_bytes += copied
            if records:
                first_record_at = first_record_at or time.monotonic()
            if first_record_at is not None and (
                records >= bounds.max_records
                or copied_bytes >= bounds.max_bytes
                or time.monotonic() - first_record_at >= self.max_seconds
            ):
                return ChunkEnd.BOUND, records
            if until is None:
                continue
            if records and not got:
                return ChunkEnd.FETCHED_ALL, records
            if self.stream_ends(reader, until):
                return ChunkEnd.STREAM_ENDS, records
            if self.newly_stopped(reader):
                return ChunkEnd.READ_STOPPED, records
        return ChunkEnd.READS_DONE, records

    def produce_records(self, state: RangeState, messages: list[Message]) -> int:
        """Produce one range's records (:meth:`outgoing`), in order, to its remote partition, with the delivery
        reports the chunk's deliveries give them, counting them in ``chunk_records``; returns their payload bytes."""
        produce, poll = self.producer.produce, self.producer.poll
        source = state.source
        topic, partition = source.remote_topic, source.partition
        records = self.outgoing(state, messages)
        reports = self.deliveries.reports(source.remote, source, [record[0] for record in records])
        copied = 0
        for (offset, key, value, headers, timestamp), report in zip(records, reports, strict=True):
            blocked = False
            while True:
                try:
                    produce(
                        topic,
                        value,
                        key,
                        partition=partition,
                        timestamp=timestamp,
                        headers=headers,
                        on_delivery=report,
                    )
                    break
                except BufferError:
                    if not blocked:
                        blocked = True
                        self.remotes.waiting()
                    poll(0.05)
                    self.remotes()
                except KafkaException as error:
                    code = error.args[0].code()
                    if code == KafkaError.MSG_SIZE_TOO_LARGE:
                        raise record_too_large(
                            self.task, source, offset, len(key or b"") + len(value or b"")
                        ) from error
                    if code == KafkaError._STATE:
                        self.raise_failed_delivery()
                    raise
            copied += (len(key) if key else 0) + (len(value) if value else 0)
        poll(0)
        state.chunk_records += len(records)
        return copied

    def outgoing(self, state: RangeState, messages: list[Message]) -> list[Outgoing]:
        """The records to produce for one range's ``messages``: source offset, key, value, headers and timestamp.

        Key, value and headers go out as they came in, except as the range's transforms change them or drop the
        record (:meth:`transformed`) and, then, the schema ids of a topic whose records are framed when the task
        translates them (:mod:`airmirror.schemas.record_ids`; never on a side a field transform wrote in Avro with a
        target id, :mod:`airmirror.schemas.avro_fields` rule 4).  The source timestamp is kept, except that a record
        without one (-1) gets the produce time (librdkafka's timestamp 0).
        """
        source, ids, transforms = state.source, self.ids, state.transforms
        rewrite = ids.rewriter(source.topic, source.partition) if ids is not None and ids.framed(source.topic) else None
        records: list[Outgoing] = []
        for message in messages:
            offset = offset_of(message)
            settled = NO_SIDES
            if transforms is None:
                key, value, headers = message.key(), message.value(), message.headers()
            else:
                kept = self.transformed(state, transforms, message, offset)
                if kept is None:
                    continue
                key, value, headers = kept
                settled = transforms.settled
            if rewrite is not None:
                key, value, headers, passed = rewrite(offset, key, value, headers, settled)
                state.chunk_passed += passed
            timestamp = message.timestamp()[1]
            records.append((offset, key, value, headers, timestamp if timestamp > 0 else 0))
        return records

    def transformed(
        self, state: RangeState, transforms: RecordTransforms, message: Message, offset: int
    ) -> tuple[bytes | None, bytes | None, Headers | None] | None:
        """The record as the range's transforms leave it (:mod:`~airmirror.replication.spark.record_transforms`), or
        ``None`` when it produces nothing: dropped by a step (counted in ``chunk_filtered``), or one a transform
        cannot process when the task skips those (counted in ``chunk_skipped``); otherwise such a record fails the
        chunk, named."""
        try:
            kept = transforms.apply(message.key(), message.value(), message.headers(), message.timestamp()[1])
        except TransformFailure as failure:
            if not self.task.skip_failed_records:
                raise transform_failed(state.source, offset, failure) from failure
            if self.task.dead_letter_topic is not None:
                self.dead_letter(state.source, message, offset, failure)
            state.chunk_skipped += 1
            return None
        if kept is None:
            state.chunk_filtered += 1
        return kept

    def dead_letter(self, source: RangeTask, message: Message, offset: int, failure: TransformFailure) -> None:
        """Write the source record as it came (key, value, headers, timestamp) to partition 0 of the dead-letter
        topic, in the open chunk transaction (so exactly once: its chunk commits it or aborts it), with Connect's
        ``__connect.errors.*`` headers when the task adds them.  Its delivery report is the batch log's kind: no
        source offset is paired with it (:meth:`~airmirror.replication.spark.deliveries.ChunkDeliveries.logged`)."""
        task = self.task
        assert task.dead_letter_topic is not None
        headers: Headers = [*(header_list(message.headers()) or ())]  # a copy: the context headers are appended
        if task.dead_letter_headers:
            context = {
                "topic": source.topic,
                "partition": str(source.partition),
                "offset": str(offset),
                "connector.name": task.flow,
                "stage": "TRANSFORMATION",
                "class.name": failure.step_class,
                "exception.class.name": type(failure).__name__,
                "exception.message": str(failure),
            }
            headers += [(f"__connect.errors.{name}", text.encode("utf-8")) for name, text in context.items()]
        record = (task.dead_letter_topic, message.value(), message.key())
        while True:
            try:
                self.producer.produce(
                    *record,
                    partition=0,
                    timestamp=max(message.timestamp()[1], 0),
                    headers=headers,
                    on_delivery=self.deliveries.logged,
                )
                return
            except BufferError:
                self.producer.poll(0.05)

    def raise_failed_delivery(self) -> None:
        """Raise the chunk's failed delivery, once ``produce()`` met the failed transaction: a record the broker
        refused (one too large for the target, say) fails the transaction, and the producer refuses every later
        ``produce()`` naming only its state ("Erroneous state"), often before the refused record's report has been
        served, and purges the records still queued.  Unless every record reports, the refused record may have no
        report: :class:`~airmirror.replication.spark.deliveries.Unproven`.  Else its report names the record and the
        cause: wait for it up to :data:`FAILED_DELIVERY_POLLS` short polls for one that is not a purge."""
        if not self.deliveries.every_record:
            raise Unproven("the transaction failed")
        self.await_named_failure()
        self.raise_errors()

    def await_named_failure(self) -> None:
        """Serve delivery reports, up to :data:`FAILED_DELIVERY_POLLS` short polls, until the chunk knows a failure
        that is not a purge (librdkafka may report the purged records before the refused one)."""
        for _ in range(FAILED_DELIVERY_POLLS):
            cause = self.deliveries.cause()
            if cause is not None and not cause.purged:
                return
            self.producer.poll(FAILED_DELIVERY_POLL_S)

    def raise_errors(self) -> None:
        """Raise the chunk's first failed delivery (:meth:`~airmirror.replication.spark.deliveries.ChunkDeliveries.
        cause`), if any, once its cause is known (:meth:`await_named_failure`, while only purges are);
        :class:`~airmirror.replication.spark.deliveries.Unproven` unless every record reports."""
        self.deliveries.raise_unproven()
        failure = self.deliveries.cause()
        if failure is None:
            return
        if failure.purged:
            self.await_named_failure()
            failure = self.deliveries.cause() or failure
        raise delivery_failure(self.task, failure)

    def flush(self) -> None:
        """Wait until every record of the chunk is delivered; stop at the first failed delivery and raise it, at a
        transaction that failed meanwhile (deliveries rule 3), or at a remote topic deleted meanwhile.

        A failed delivery makes the transaction abortable, and librdkafka then keeps the records queued behind it
        until the abort: waiting for them would only time out.  A record without a report says it failed only by
        the transaction's state, which ``begin_transaction`` reads inside a transaction without changing it
        (:meth:`~airmirror.replication.spark.deliveries.ChunkDeliveries.check`)."""
        producer, deliveries = self.producer, self.deliveries
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        self.remotes.waiting()
        while remaining := producer.flush(FLUSH_POLL_S):
            self.raise_errors()
            deliveries.check(producer.begin_transaction)
            self.remotes()
            if time.monotonic() > deadline:
                raise ReplicationFailure(f"{remaining} records still undelivered after {FLUSH_TIMEOUT_S:.0f}s")
        self.raise_errors()

    def commit_chunk(self, reader: RangesReader) -> None:
        """Write the runs and progress of every range the chunk changed, their anchors, and commit.  The schema ids
        the task mapped that no committed runs record carries yet ride on the chunk's first runs record."""
        uncarried = {} if self.ids is None else {s: t for s, t in self.ids.new_ids.items() if s not in self.carried_ids}
        pending = dict(uncarried)
        changed = []
        for key, state in self.states.items():
            read = reader.reads.get(key)
            if state.progress.done or read is None:
                continue
            if not state.chunk_records and read.reached == state.progress.position and not read.done:
                continue
            changed.append((key, state, read, self.deliveries.runs(state.source.remote)))
        self.verify_incarnations([(state, runs) for _, state, _, runs in changed])
        committed = {
            key: self.chunk_progress(state, runs, read.reached, read.reached_epoch, read.done, pending)
            for key, state, read, runs in changed
        }
        self.commit_progress(committed)
        if not pending:
            self.carried_ids.update(uncarried)
        for key, progress in committed.items():
            state = self.states[key]
            state.progress = progress
            state.start_chunk()

    def commit_progress(self, committed: Mapping[tuple[str, int], Progress]) -> None:
        """Write the progress records of ``committed`` (source partition to its new progress), their anchors in one
        offset commit, and commit the open transaction; then it is the other producer's turn (rule 10)."""
        task, producer = self.task, self.producer
        anchors: list[TopicPartition] = []
        for key, progress in committed.items():
            encoded = progress.encode()
            producer.produce(
                task.log_topic,
                encoded.encode("utf-8"),
                progress_key(task.flow, *key),
                partition=0,
                on_delivery=self.deliveries.logged,
            )
            source = self.states[key].source
            anchors.append(
                TopicPartition(source.remote_topic, source.partition, progress.downstream_position, metadata=encoded)
            )
        if anchors:
            with hard_deadline(self.call_s, f"sending the anchors of {self.transactional_id}"):
                producer.send_offsets_to_transaction(anchors, self.group_metadata, self.call_s)
        with hard_deadline(self.call_s, f"a commit of {self.transactional_id}"):
            producer.commit_transaction(self.call_s)
        self.turn = 1 - self.turn

    def verify_incarnations(self, changed: list[tuple[RangeState, list[OffsetRun]]]) -> None:
        """Before a chunk commits (rule 7): ask the cluster for the id of every remote topic the chunk wrote records
        to (``changed``: each range the chunk changed, with its runs), and raise for one that is not the incarnation
        the driver found; then raise for a range whose first record landed below its position, which only another
        incarnation can take."""
        written = [(state, runs[0].downstream_start) for state, runs in changed if runs]
        self.incarnations.verify(state.source.remote_topic for state, _ in written)
        for state, first in written:
            if first < state.progress.downstream_position:
                raise ReplicationFailure(
                    f"remote topic {state.source.remote_topic} of flow {self.task.flow} was recreated on the target "
                    f"while a copy task wrote to it: partition {state.source.partition} took a record at offset "
                    f"{first}, below the {state.progress.downstream_position} this copy had written there; nothing of "
                    "the open chunk is committed, and the next round stops the topic (see `airmirror status`)"
                )

    def chunk_progress(
        self,
        state: RangeState,
        runs: list[OffsetRun],
        reached: int,
        reached_epoch: int | None,
        done: bool,
        schema_ids: dict[int, int],
    ) -> Progress:
        """Produce the chunk's runs records (``runs``) of one range and return its new progress (not yet committed);
        its first runs record carries ``schema_ids``, which is then emptied."""
        task, progress = self.task, state.progress
        chunk = progress.chunk + 1
        delivered = sum(run.copies for run in runs)
        if delivered != state.chunk_records:
            raise ReplicationFailure(
                f"{state.source.name}: {state.chunk_records} records produced but {delivered} delivered"
            )
        parts = runs_parts(task.batch_id, chunk, runs)
        if parts and schema_ids:
            parts[0] = replace(parts[0], schema_ids=dict(schema_ids))
            schema_ids.clear()
        for part in parts:
            key = runs_key(task.flow, state.source.topic, state.source.partition, task.batch_id, chunk, part.part)
            self.producer.produce(
                task.log_topic, encode_runs(part), key, partition=0, on_delivery=self.deliveries.logged
            )
        return Progress(
            batch_id=task.batch_id,
            chunk=chunk,
            start=progress.start,
            end=progress.end,
            position=reached,
            done=done,
            records=progress.records + state.chunk_records,
            bytes=progress.bytes + state.chunk_bytes,
            downstream_start=progress.downstream_start
            if progress.downstream_start is not None
            else (runs[0].downstream_start if runs else None),
            downstream_position=runs[-1].downstream_stop if runs else progress.downstream_position,
            first_runs_offset=progress.first_runs_offset
            if progress.first_runs_offset is not None or not runs
            else task.log_end,
            source_topic_id=progress.source_topic_id,
            remote_topic_id=progress.remote_topic_id,
            leader_epoch=reached_epoch if state.chunk_records else progress.leader_epoch,
            passed=progress.passed + state.chunk_passed,
            filtered=progress.filtered + state.chunk_filtered,
            skipped=progress.skipped + state.chunk_skipped,
        )


def resume_from(batch_id: int, source: RangeTask, found: Progress | None) -> Progress:
    """Where this attempt starts the range, from the partition's newest committed progress (rule 4; what ``found``
    means is :func:`~airmirror.replication.spark.standing.range_standing`'s)."""
    incarnations = Incarnations(source.source_topic_id, source.remote_topic_id)
    match range_standing(batch_id, found, start=source.start, resets=source.resets, incarnations=incarnations):
        case PartCopied(progress) | Done(progress):
            return progress
        case TargetAhead(progress):
            raise ReplicationFailure(
                f"{source.remote_topic}-{source.partition} on the target already holds source offsets up to "
                f"{progress.position} (batch {progress.batch_id}), beyond the metadata DB cursor {source.start}; "
                "refusing to write duplicates"
            )
        case Untouched(downstream_position):
            return Progress(
                batch_id=batch_id,
                chunk=NO_CHUNK,
                start=source.start,
                end=source.end,
                position=source.start,
                done=False,
                records=0,
                bytes=0,
                downstream_start=None,
                downstream_position=downstream_position,
                first_runs_offset=None,
                source_topic_id=source.source_topic_id,
                remote_topic_id=source.remote_topic_id,
                leader_epoch=source.start_epoch,
            )


def fence_attempts(producer_config: Mapping[str, Any], transactional_ids: Iterable[str], access: AccessScope) -> None:
    """Fence every attempt still at work under these transactional ids: its open transaction is aborted and
    it can never commit again.  Used before a resumed batch changes ranges such an attempt may be copying.
    A refusal names the ACL to grant (``access``)."""
    for transactional_id in transactional_ids:
        producer = Producer(
            logged(
                {
                    **producer_config,
                    "transactional.id": transactional_id,
                    "enable.sparse.connections": False,
                    **NO_TOPIC_CREATION,
                }
            )
        )
        with naming_refusals(access, transactional_id=transactional_id):
            await_broker_connections(producer, None)
            producer.init_transactions(60)


def await_broker_connections(producer: Producer, topic: str | None) -> None:
    """Return once the producer is connected to the brokers by node id, not only by the bootstrap address.

    librdkafka drops its bootstrap connections after the first metadata response.  ``init_transactions()``
    called before a node connection is up finds no broker to ask for the transaction coordinator and
    retries 500 ms later.  A second metadata request can only be answered over a node connection, so
    after it the coordinator lookup goes out at once.
    """
    for _ in range(2):
        producer.list_topics(topic, 30)


def anchor_group_metadata(task: CopyTask) -> Any:
    consumer = Consumer(
        logged({**task.target_consumer_config, "group.id": task.anchor_group, "enable.auto.commit": False})
    )
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def abort_quietly(producer: Producer) -> None:
    """Abort the open transaction if the producer still can; a fenced or dead producer needs no abort."""
    with suppress(KafkaException):
        producer.abort_transaction(TRANSACTION_CALL_S)


def run_tasks(tasks: Iterable[CopyTask]) -> Iterator[RangeCopied]:
    """The per-partition function of the Spark job (:func:`~airmirror.replication.spark.copy_job.run_copy_job`):
    copy the tasks that arrive (one per Spark partition)."""
    context = TaskContext.get()
    first_attempt = context is not None and context.attemptNumber() == 0
    for task in tasks:
        yield from run_attempt(task, first_attempt)


def run_attempt(task: CopyTask, first_attempt: bool) -> list[RangeCopied]:
    """One Spark task of the copy job: read the task's ranges from the source and copy them; returns what this
    attempt copied of each range.

    The read is opened first, so source records are already being fetched while the producer fences.  A refusal
    by either cluster names the ACL to grant (:mod:`airmirror.kafka.authorization`).
    """

    def target() -> AbstractContextManager[None]:
        return naming_refusals(
            task.target_access,
            topic=task.remote_topics,
            group=task.anchor_group,
            transactional_id=task.transactional_ids[0],
        )

    with ExitStack() as closing:
        if task.stream_until is not None:
            with target():
                attempt = closing.enter_context(CopyAttempt(task))
                attempt.fence(first_attempt)
            reader = RangesReader(
                task.source_consumer_config, attempt.stream_reads(), access=task.source_access, buffer=task.buffer
            )
            with reader, target():
                attempt.stream(reader, task.stream_until)
        else:
            reads = [ReadRange(r.topic, r.partition, r.start, r.end, r.start_epoch) for r in task.ranges]
            reader = RangesReader(task.source_consumer_config, reads, access=task.source_access, buffer=task.buffer)
            with reader, target():
                attempt = closing.enter_context(CopyAttempt(task))
                attempt.fence(first_attempt)
                attempt.copy(reader)
    return [
        RangeCopied(
            topic=state.source.topic,
            partition=state.source.partition,
            records=state.progress.records,
            bytes=state.progress.bytes,
        )
        for state in attempt.states.values()
    ]
