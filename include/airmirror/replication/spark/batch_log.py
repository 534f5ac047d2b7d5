"""The batch log: the durable record, on the target cluster, of how far every partition copy got.

A copy task copies its planned ranges as a sequence of Kafka transactions (*chunks*, see
:mod:`airmirror.replication.spark.task_writer`).  Every chunk transaction atomically contains, for each range
it changed:

1. the chunk's copied records, in source order, in the remote topic's same partition;
2. one or more *runs records* in the batch-log topic (``names.batch_log_topic(source)``, target cluster,
   one partition, compacted), keyed ``runs-{flow}-{topic}-{partition}-{batch}-{chunk}-{part}``: the
   chunk's offset-sync runs, at most :data:`RUNS_PER_RECORD` runs and holes per record (a run with more holes is
   split at one), so a record's size is bounded whatever the range holds;
3. the partition's *progress record* in the same topic, keyed ``progress-{flow}-{topic}-{partition}``
   (:class:`Progress`): batch id, chunk number, planned range, the next source offset to copy, the
   downstream position, running totals and a log offset at or below the range's first runs record;
4. an *anchor*: a transactional offset commit of the same :class:`Progress` (as metadata) for the group
   ``names.anchor_group(source, target)`` on the remote topic-partition.

Because all of it is one transaction, the newest committed progress record of a partition says exactly
which source records of which batch are in the target.  Rules:

* **The progress record is the truth; the anchor is only a fast path.**  The topic is compacted and
  progress records are never deleted, so the truth is kept for as long as a batch can be resumed.  An
  anchor is trusted only when its metadata parses as a :class:`Progress` whose downstream position equals
  the committed offset.  A missing anchor (expired after ``offsets.retention.minutes``, deleted with
  ``kafka-consumer-groups --delete``) or one overwritten by another client never means "not copied":
  :func:`read_progress` then scans the batch-log topic for the newest progress record.
* Progress is read only after ``init_transactions()`` fenced any older producer of the partition, and a
  scan waits until the committed end of the log reaches the high watermark seen when it began, so no
  committed progress record can be missed behind another partition's open transaction.
* **A scan starts at the batch's log floor, never at the log's start.**  Every record a batch's copy jobs write
  lies at or above the log's high watermark before its first job, which the metadata DB stores with the batch
  (its *log floor*, :attr:`~airmirror.model.TaskJobs.log_floor`).  Only progress of the unfinished batch
  decides where a range resumes, so a partition without a trusted anchor is looked up from the floor on
  (:func:`read_progress`), and before the batch's first job, when nothing of it can be in the log, not at all:
  what a lookup reads is bounded by what the batch wrote, never by the flow's age.  (A batch begun by an
  airmirror that stored no floor, but whose job has run, is scanned from the log start once.)
* **A job that was superseded writes nothing.**  Before it fences the copy tasks of earlier jobs, the driver commits a
  new job token to the anchor group, on the batch log's partition (:func:`commit_job`, :func:`job_marker`): every
  task of the job it then runs carries that token.  A task reads the token with its anchors, in the same request,
  after its ``init_transactions()``, and writes nothing unless it is its own.  So once a run has started its job,
  an attempt of any earlier job (a Spark retry of a run that lost its lease, under a transactional id the new job
  does not use) either was fenced or reads the newer token and stops: no two jobs ever write at once.  A missing
  token (the group deleted) stops the task too; the next job commits its own.
* **Every partition of a stream has an anchor.**  A streaming task commits the progress of its ranges without
  a trusted anchor at once, before copying (rule 17 of :mod:`~airmirror.replication.spark.task_writer`), so a
  partition that never holds a record is anchored too, and one bounded recovery after the anchor group expired
  or was deleted puts every partition back on the fast path.
* **One version rule** (:func:`record_fields`), for progress records, runs records, anchors and job markers
  alike: each carries its format version ``v``.  A value that is no airmirror record at all (absent, not a JSON
  object, no ``v``: another client's offset-commit metadata) reads as nothing.  A record whose version this
  airmirror does not read, or whose fields do not fit its version, raises :class:`UnreadableRecord` naming it:
  another airmirror wrote it, and reading it as nothing (a range not copied) would copy records twice.
* Runs records are kept until the metadata DB has committed their batch; :func:`tombstone` then writes
  tombstones for them, so compaction removes them.  The topic's settings (:data:`LOG_TOPIC_CONFIG`) let the
  cleaner reclaim superseded records, tombstones and transaction markers within minutes, so the log's live
  records stay bounded by the partitions and the last minutes' writes, whatever the flow's age.
"""

from __future__ import annotations

import base64
import builtins
import json
import logging
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from airmirror import names
from airmirror.errors import ReplicationFailure
from airmirror.kafka.authorization import raise_queued_refusal, refuses_unused_group
from airmirror.kafka.client_log import logged
from airmirror.kafka.clients import NEW_TOPIC_WAIT_S, REQUEST_TIMEOUT_S
from airmirror.kafka.records import OutgoingRecord, write_records
from airmirror.kafka.retry import retry_transient
from airmirror.model import OffsetRun, packed_holes, unpacked_holes
from airmirror.names import joined
from airmirror.replication.offset_runs import split_run
from airmirror.replication.spark.range_reader import offset_of

if TYPE_CHECKING:
    from airmirror.config import FlowConfig

log = logging.getLogger(__name__)
T = TypeVar("T")
Source = TypeVar("Source")
Remote = TypeVar("Remote")
LOG_FORMAT_VERSION = 2
"""The format version of every batch-log record and anchor this airmirror writes (runs records with holes aside)."""
HOLES_FORMAT_VERSION = 3
"""The version of a runs record whose runs have holes: an airmirror that reads only version 2 refuses it rather than
take its holes for copies."""
RUNS_PER_RECORD = 100_000
"""At most this many runs and holes per runs record: 2.4 MB before compression, far below the topic's limit."""
RUN_STRUCT = struct.Struct(">qqq")
LOG_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "max.message.bytes": str(16 * 1024 * 1024),
    "segment.ms": str(60 * 1000),
    "delete.retention.ms": str(60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "max.compaction.lag.ms": str(5 * 60 * 1000),
}
"""The batch log's topic settings: compacted, segments rolled every minute (the cleaner never touches the active
one), tombstones and transaction markers dropped a minute after their segment was cleaned, and cleaning due once
a tenth of the log is dirty or a record has waited five minutes."""
SCAN_FETCH_WAIT_MS = 20
"""How long the broker may hold a fetch of a scan (:func:`scan_log`) that finds nothing new.  A scan reads to a known
end, and the last offset below that end is a transaction's commit marker, which a consumer never returns: the scan's
last fetch, which only learns it is at the end, finds nothing.  Under the broker's default wait (half a second) every
scan paid that much for it; measured on 2 cores, reading a batch's runs records after its copy job took 0.6 s."""
SCAN_STALL_S = 120.0
"""How long a scan of the batch log may go without reading past one more offset before it fails: an open
transaction of another producer holds a read_committed scan at its first record until it ends."""
NEW_LOG_ERRORS = (
    KafkaError._UNKNOWN_PARTITION,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._NOENT,
    KafkaError.LEADER_NOT_AVAILABLE,
)
PASSING_ERRORS = (
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION,
)
"""Errors of a batch-log read that librdkafka recovers from by itself (a target broker restarting)."""
ANCHOR_CALL_S = 5.0
"""How long one look-up of committed anchors waits for the group coordinator before the next attempt."""


class UnreadableRecord(ReplicationFailure):
    """A batch-log record or anchor this airmirror cannot read: the one version rule of the module docstring."""


def record_fields(value: str | builtins.bytes | None, what: str, versions: Iterable[int]) -> dict[str, Any] | None:
    """The fields of batch-log record or anchor ``value`` (``what`` names it in errors), its version among
    ``versions`` (under ``"v"`` in the result); ``None`` when it is no airmirror record.  Raises
    :class:`UnreadableRecord` for a version not among ``versions`` (the one version rule)."""
    try:
        fields = json.loads(value) if value else None
    except ValueError:
        return None
    if not isinstance(fields, dict) or "v" not in fields:
        return None
    if fields["v"] not in versions:
        raise UnreadableRecord(
            f"{what} is of format version {fields['v']!r}, which this airmirror does not read (it reads "
            f"{', '.join(map(str, sorted(versions)))}): another airmirror wrote it; run that airmirror's version"
        )
    return fields


@dataclass(frozen=True)
class Progress:
    """How far one partition's copy got, as of its newest committed chunk transaction.

    Source offsets ``[start, position)`` of range ``[start, end)`` of batch ``batch_id`` are in the
    target; ``done`` says the range is finished (``position`` is then where it ended: ``end``, or less when
    the source log was truncated below the plan).  ``chunk`` counts the committed chunks that changed the
    range, ``records``/``bytes`` total the range so far, ``downstream_start``/``downstream_position`` bound the
    copied records on the target, and ``first_runs_offset`` is a batch-log offset at or below the range's
    first runs record: the log's end before the job that wrote it (``None`` while nothing was copied).
    ``source_topic_id`` and ``remote_topic_id`` name the incarnations of both topics: progress of other
    incarnations says nothing about this copy.  ``leader_epoch`` is the source leader epoch of the record at
    ``position - 1`` when known, so that a resumed read validates its position against the leader.  ``passed``
    counts the range's records copied unchanged with an unknown schema id (:mod:`airmirror.schemas.record_ids`),
    ``filtered`` the source records the flow's transforms dropped (:mod:`airmirror.config.transforms`): read, and
    never written, so ``records`` counts only what the target holds; ``skipped`` those a transform could not process
    that ``errors.tolerance = all`` skipped, never written either.
    """

    batch_id: int
    chunk: int
    start: int
    end: int
    position: int
    done: bool
    records: int
    bytes: int
    downstream_start: int | None
    downstream_position: int
    first_runs_offset: int | None
    source_topic_id: str | None = None
    remote_topic_id: str | None = None
    leader_epoch: int | None = None
    passed: int = 0
    filtered: int = 0
    skipped: int = 0

    def encode(self) -> str:
        return json.dumps({"v": LOG_FORMAT_VERSION, **asdict(self)}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | builtins.bytes | None) -> Progress | None:
        """The progress in ``text``, or ``None`` when it is no airmirror record (the one version rule).  A field
        with a default may be missing: records written before it was added still read."""
        fields = record_fields(text, "a progress record", (LOG_FORMAT_VERSION,))
        if fields is None:
            return None
        del fields["v"]
        try:
            return cls(**fields)
        except TypeError as error:
            raise UnreadableRecord(f"a progress record does not fit its format version: {error}") from error


@dataclass(frozen=True)
class RunsRecord:
    """One part of one chunk's offset-sync runs; ``schema_ids`` are the schema ids (source -> target) the task
    mapped itself and no committed runs record of it carried yet, on the first record of a chunk
    (:mod:`airmirror.schemas.record_ids` rule 3): the driver stores them with the runs, whatever ends the job."""

    batch_id: int
    chunk: int
    part: int
    runs: tuple[OffsetRun, ...]
    schema_ids: Mapping[int, int] = field(default_factory=dict)


def progress_key(flow: str, topic: str, partition: int) -> bytes:
    return f"progress-{joined(flow, topic, partition)}".encode()


def runs_key(flow: str, topic: str, partition: int, batch_id: int, chunk: int, part: int) -> bytes:
    return f"runs-{joined(flow, topic, partition, batch_id, chunk, part)}".encode()


def encode_runs(record: RunsRecord) -> bytes:
    """A runs record's value: JSON with its runs packed (:data:`RUN_STRUCT`, zlib, base64) and, under ``holes``, the
    holes of each run that has some (:func:`~airmirror.model.packed_holes`, base64) by its index in the record."""
    packed = b"".join(RUN_STRUCT.pack(r.upstream_start, r.upstream_end, r.downstream_start) for r in record.runs)
    body: dict[str, object] = {
        "v": LOG_FORMAT_VERSION,
        "batch_id": record.batch_id,
        "chunk": record.chunk,
        "part": record.part,
        "runs": base64.b64encode(zlib.compress(packed)).decode("ascii"),
    }
    holes = {str(i): _text(packed_holes(run.holes)) for i, run in enumerate(record.runs) if run.holes}
    if holes:
        body["v"], body["holes"] = HOLES_FORMAT_VERSION, holes
    if record.schema_ids:
        body["ids"] = {str(source): target for source, target in record.schema_ids.items()}
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_runs(value: bytes) -> RunsRecord:
    """The runs record in ``value``; one that is no airmirror record or of another version raises
    :class:`UnreadableRecord` (the one version rule: a runs record is found by its key, so it is ours)."""
    body = record_fields(value, "a runs record", (LOG_FORMAT_VERSION, HOLES_FORMAT_VERSION))
    if body is None:
        raise UnreadableRecord("a runs record is not one: it carries no format version")
    packed = zlib.decompress(base64.b64decode(body["runs"]))
    holes = body.get("holes") or {}
    starts = (RUN_STRUCT.unpack_from(packed, offset) for offset in range(0, len(packed), RUN_STRUCT.size))
    runs = tuple(
        OffsetRun(up, up_end, down, holes=unpacked_holes(base64.b64decode(holes.get(str(i), ""))))
        for i, (up, up_end, down) in enumerate(starts)
    )
    ids = {int(source): int(target) for source, target in (body.get("ids") or {}).items()}
    return RunsRecord(body["batch_id"], body["chunk"], body["part"], runs, ids)


def runs_parts(batch_id: int, chunk: int, runs: Sequence[OffsetRun]) -> list[RunsRecord]:
    """A chunk's runs in records of at most :data:`RUNS_PER_RECORD` runs and holes each, in order; a run with more
    holes than a record has room for is split at a hole (:func:`~airmirror.replication.offset_runs.split_run`),
    and reading merges the parts again (:func:`~airmirror.replication.offset_runs.merge_runs`)."""
    parts: list[list[OffsetRun]] = [[]]
    room = RUNS_PER_RECORD
    for whole in runs:
        pending: OffsetRun | None = whole
        while pending is not None:
            if room < 1:
                parts.append([])
                room = RUNS_PER_RECORD
            head, pending = split_run(pending, room - 1)
            parts[-1].append(head)
            room -= 1 + len(head.holes) // 2
    return [RunsRecord(batch_id, chunk, part, tuple(members)) for part, members in enumerate(parts) if members]


def _text(packed: builtins.bytes | None) -> str:
    return base64.b64encode(packed or b"").decode("ascii")


def log_consumer(
    consumer_config: Mapping[str, Any], group: str = names.reader_group("batch-log"), fetch_wait_ms: int | None = None
) -> Consumer:
    """A read_committed consumer of the batch log that never commits and never resets silently; with
    ``fetch_wait_ms``, the broker holds a fetch that finds nothing new that long at most."""
    waits = {} if fetch_wait_ms is None else {"fetch.wait.max.ms": fetch_wait_ms}
    return Consumer(
        logged(
            {
                **consumer_config,
                **waits,
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "error",
                "enable.partition.eof": True,
            }
        )
    )


def read_anchors(
    consumer_config: Mapping[str, Any], group: str, partitions: Sequence[tuple[str, int]], timeout: float = 60.0
) -> dict[tuple[str, int], Progress | None]:
    """The trusted anchors of ``group`` for remote ``(topic, partition)`` pairs (``None`` where there is no
    trustworthy one: see the module docstring)."""
    return {
        (tp.topic, tp.partition): trusted_anchor(tp) for tp in read_group(consumer_config, group, partitions, timeout)
    }


def read_group(
    consumer_config: Mapping[str, Any], group: str, partitions: Sequence[tuple[str, int]], timeout: float = 60.0
) -> list[TopicPartition]:
    """What ``group`` committed for ``(topic, partition)`` pairs, with metadata, in one request.  Transient
    coordinator errors are retried until ``timeout``; a refused group raises at once
    (:func:`~airmirror.kafka.authorization.raise_queued_refusal`)."""
    if not partitions:
        return []
    consumer = Consumer(logged({**consumer_config, "group.id": group, "enable.auto.commit": False}))

    def attempt() -> list[TopicPartition]:
        try:
            return committed_offsets(consumer, partitions, ANCHOR_CALL_S)
        except KafkaException:
            raise_queued_refusal(consumer)
            raise

    try:
        committed: list[TopicPartition] = retry_transient(attempt, f"read the anchors of group '{group}'", timeout)
    finally:
        consumer.close()
    return committed


def job_marker(log_topic: str) -> tuple[str, int]:
    """Where the anchor group holds the flow's newest copy job: the batch log's partition (no remote partition, so
    never an anchor; see the module docstring)."""
    return (log_topic, 0)


def encode_job(job: str) -> str:
    return json.dumps({"v": LOG_FORMAT_VERSION, "job": job}, separators=(",", ":"))


def decode_job(metadata: str | builtins.bytes | None) -> str | None:
    """The job named in a job marker's metadata, or ``None`` when it names none (the one version rule)."""
    fields = record_fields(metadata, "a job marker", (LOG_FORMAT_VERSION,))
    job = None if fields is None else fields.get("job")
    return job if isinstance(job, str) else None


def commit_job(consumer_config: Mapping[str, Any], group: str, log_topic: str, job: str) -> None:
    """Commit ``job`` as the flow's newest copy job (:func:`job_marker`), waiting for the coordinator's answer (and,
    for a batch log created a moment ago, for the coordinator to know it: :func:`while_log_is_new`)."""
    consumer = Consumer(logged({**consumer_config, "group.id": group, "enable.auto.commit": False}))
    try:
        marker = TopicPartition(*job_marker(log_topic), 0, metadata=encode_job(job))

        def attempt() -> None:
            try:
                while_log_is_new(lambda: consumer.commit(offsets=[marker], asynchronous=False))
            except KafkaException:
                raise_queued_refusal(consumer)
                raise

        retry_transient(attempt, f"record the newest copy job in group '{group}'", 60.0)
    finally:
        consumer.close()


def committed_offsets(
    consumer: Consumer, partitions: Sequence[tuple[str, int]], timeout: float
) -> list[TopicPartition]:
    """The consumer group's committed offsets (with metadata) of ``partitions``; a per-partition error raises."""
    committed = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout)
    errors = [tp.error for tp in committed if tp.error is not None]
    if errors:
        raise KafkaException(errors[0])
    return committed


def trusted_anchor(committed: TopicPartition) -> Progress | None:
    progress = Progress.decode(committed.metadata)
    if progress is None or committed.offset < 0 or progress.downstream_position != committed.offset:
        return None
    return progress


def look_up_progress(
    anchors: Mapping[Remote, Progress | None],
    *,
    known: Mapping[Remote, Progress | None] | None = None,
    scan: Callable[[list[Remote]], Mapping[Remote, Progress | None]] | None = None,
) -> dict[Remote, Progress | None]:
    """The one lookup of where each remote partition's copy got, the driver's and the tasks' alike: its trusted
    anchor (``anchors``, see the module docstring); for one without, what the driver found before the job
    (``known``, a task's first attempt), else what ``scan`` finds in the batch log (from the batch's log floor on),
    else nothing (``None``: the batch's first job has not run, so the log holds nothing of it).  What the progress
    found means for a range is :func:`~airmirror.replication.spark.standing.range_standing`'s."""
    found = dict(anchors)
    missing = [remote for remote, anchor in found.items() if anchor is None]
    if missing and known is not None:
        found.update((remote, known[remote]) for remote in missing)
    elif missing and scan is not None:
        found.update(scan(missing))
    return found


def read_progress(
    consumer_config: Mapping[str, Any],
    anchor_group: str,
    log_topic: str,
    flow: str,
    partitions: Mapping[tuple[str, int], tuple[str, int]],
    scan_from: int | None,
    before_scan: Callable[[], None] | None = None,
) -> dict[tuple[str, int], Progress | None]:
    """The driver's :func:`look_up_progress` of every partition, keyed like ``partitions`` (each remote
    ``(topic, partition)`` to its source ``(topic, partition)``), as far as it can concern the batch whose log floor
    is ``scan_from``: the anchors of ``anchor_group``, then a scan from ``scan_from`` on (:func:`scan_progress`),
    after ``before_scan()`` (which may fence the attempts whose open transactions would hold the scan up); with
    ``scan_from`` ``None`` (the batch's first job has not run) nothing is scanned."""

    def scan(missing: list[tuple[str, int]]) -> dict[tuple[str, int], Progress | None]:
        if before_scan is not None:
            before_scan()
        assert scan_from is not None
        return scan_progress(
            consumer_config, log_topic, flow, {remote: partitions[remote] for remote in missing}, scan_from
        )

    anchors = read_anchors(consumer_config, anchor_group, list(partitions))
    return look_up_progress(anchors, scan=None if scan_from is None else scan)


def scan_progress(
    consumer_config: Mapping[str, Any],
    log_topic: str,
    flow: str,
    partitions: Mapping[tuple[str, int], tuple[str, int]],
    scan_from: int,
) -> dict[tuple[str, int], Progress | None]:
    """The newest progress record at or above ``scan_from`` of every partition (remote ``(topic, partition)``
    to source ``(topic, partition)``, as in :func:`read_progress`), ``None`` where there is none."""
    keys = {progress_key(flow, *source): remote for remote, source in partitions.items()}
    found: dict[tuple[str, int], Progress | None] = dict.fromkeys(partitions)
    for key, value, _ in scan_log(consumer_config, log_topic, scan_from):
        if key in keys:
            found[keys[key]] = Progress.decode(value)
    return found


def scan_log(
    consumer_config: Mapping[str, Any], log_topic: str, from_offset: int, stall: float = SCAN_STALL_S
) -> Iterator[tuple[bytes, bytes | None, int]]:
    """Committed ``(key, value, offset)`` of the batch log from ``from_offset`` (or the log start, if later)
    up to the high watermark seen at the start (:func:`log_watermarks`), so every transaction committed before
    the call is read even while its markers are still being written; waits out other open transactions and the
    errors a target broker's restart causes, within :meth:`LogReader.read_to`'s stall bound."""
    low, high = log_watermarks(consumer_config, log_topic)
    start = max(from_offset, low)
    if start >= high:
        return
    with LogReader(consumer_config, log_topic, start, fetch_wait_ms=SCAN_FETCH_WAIT_MS) as reader:
        yield from reader.read_to(high, stall)


class LogReader:
    """The one reader of the batch log, read_committed from ``from_offset`` on: a scan to a watermark
    (:func:`scan_log`) and a stream's tail (:class:`~airmirror.replication.streaming.StreamTail`) alike.
    :attr:`position` is the next offset it reads; records without a key are passed over.  Use it as a context
    manager."""

    def __init__(
        self, consumer_config: Mapping[str, Any], log_topic: str, from_offset: int, fetch_wait_ms: int | None = None
    ) -> None:
        self.log_topic, self.position = log_topic, from_offset
        self._consumer = log_consumer(consumer_config, fetch_wait_ms=fetch_wait_ms)
        self._consumer.assign([TopicPartition(log_topic, 0, from_offset)])

    def take(self, timeout: float) -> list[tuple[bytes, bytes | None, int]] | None:
        """The keyed records of one poll, after waiting up to ``timeout`` for the first; ``None`` when the poll got
        no message at all.  An error librdkafka recovers from by itself (:data:`PASSING_ERRORS`, a target broker
        restarting) is logged, and the read waits it out within its stall bound; any other fails."""
        messages = self._consumer.consume(1000, timeout)
        if not messages:
            return None
        taken = []
        for message in messages:
            error = message.error()
            if error is None:
                self.position = offset_of(message) + 1
                if (key := message.key()) is not None:
                    taken.append((key, message.value(), self.position - 1))
            elif error.code() == KafkaError._PARTITION_EOF:
                self.position = max(self.position, offset_of(message))
            elif refuses_unused_group(error):
                continue
            elif error.fatal() or not (error.retriable() or error.code() in PASSING_ERRORS):
                raise KafkaException(error)
            else:
                log.info("batch log %s: %s (librdkafka retries)", self.log_topic, error.str())
        return taken

    def read_to(self, high: int, stall: float = SCAN_STALL_S) -> Iterator[tuple[bytes, bytes | None, int]]:
        """What :meth:`take` takes until :attr:`position` reaches ``high``.  That takes as long as what it reads,
        but fails once it has read past no offset for ``stall`` seconds, saying how far it got."""
        start, moved_at, position = self.position, time.monotonic(), self.position
        while self.position < high:
            if time.monotonic() - moved_at > stall:
                raise ReplicationFailure(
                    f"a read of the batch log {self.log_topic} from offset {start} stayed at offset {self.position}, "
                    f"below {high}, for {stall:.0f}s (an open transaction that is never committed?); run again once "
                    "it has timed out"
                )
            yield from self.take(0.2) or ()
            if self.position > position:
                position, moved_at = self.position, time.monotonic()

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def while_log_is_new(call: Callable[[], T]) -> T:
    """``call()`` about the batch log.  The run's topic sync may have created the log a moment ago, and a broker
    may not know it or its leader yet: such an error is asked again, for up to
    :data:`~airmirror.kafka.clients.NEW_TOPIC_WAIT_S`."""
    deadline = time.monotonic() + NEW_TOPIC_WAIT_S
    while True:
        try:
            return call()
        except KafkaException as error:
            if error.args[0].code() not in NEW_LOG_ERRORS or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def log_watermarks(consumer_config: Mapping[str, Any], log_topic: str) -> tuple[int, int]:
    """The batch log's low and high watermarks (:func:`while_log_is_new`).  The high watermark is the end of
    everything written, committed or not: it is asked by a read_uncommitted client, because a read_committed
    client's watermark query answers the last stable offset, which stays below a transaction the broker already
    acknowledged until its markers are written (and a group's transactional offsets, the anchors, may be visible
    before the batch log's markers are)."""
    log = TopicPartition(log_topic, 0)
    consumer = Consumer(
        logged(
            {
                **consumer_config,
                "group.id": names.reader_group("batch-log"),
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
            }
        )
    )
    try:
        low, high = while_log_is_new(
            lambda: consumer.get_watermark_offsets(log, timeout=REQUEST_TIMEOUT_S, cached=False)
        )
    finally:
        consumer.close()
    return low, high


def read_runs(
    flow: FlowConfig, batch_id: int, progress: Mapping[tuple[str, int], Progress]
) -> dict[tuple[str, int], list[RunsRecord]]:
    """Every runs record of the flow's batch ``batch_id`` for the source partitions in ``progress``
    (:func:`scan_runs` of the flow's batch log, read as its target consumer); whether they account for every record
    is checked where they become results (:func:`~airmirror.replication.recording.progress_result`)."""
    return scan_runs(flow.target_client("consumer"), names.batch_log_topic(flow.source), flow.name, batch_id, progress)


def scan_runs(
    consumer_config: Mapping[str, Any],
    log_topic: str,
    flow: str,
    batch_id: int,
    progress: Mapping[tuple[str, int], Progress],
) -> dict[tuple[str, int], list[RunsRecord]]:
    """The runs records of batch ``batch_id`` the batch log still holds for the source partitions in ``progress``,
    in log order, scanned from the lowest ``first_runs_offset``; tombstoned ones may be among them until
    compaction removes them, so the caller checks what it needs."""
    starts = [p.first_runs_offset for p in progress.values() if p.first_runs_offset is not None]
    found: dict[tuple[str, int], list[RunsRecord]] = {source: [] for source in progress}
    if not starts:
        return found
    prefixes = runs_prefixes(flow, batch_id, progress)
    for key, value, _ in scan_log(consumer_config, log_topic, min(starts)):
        source = runs_source(prefixes, key)
        if source is not None and value is not None:
            found[source].append(decode_runs(value))
    return found


def runs_prefixes(flow: str, batch_id: int, sources: Iterable[tuple[str, int]]) -> dict[bytes, tuple[str, int]]:
    """The key prefix of every runs record of batch ``batch_id`` per source ``(topic, partition)``."""
    return {
        f"runs-{joined(flow, topic, partition, batch_id)}-".encode(): (topic, partition) for topic, partition in sources
    }


def runs_source(prefixes: Mapping[bytes, Source], key: bytes) -> Source | None:
    """The source partition whose runs record ``key`` is, among ``prefixes`` (:func:`runs_prefixes`, its
    partitions named as the caller names them)."""
    return prefixes.get(key.rsplit(b"-", 2)[0] + b"-")


def tombstone(flow: FlowConfig, keys: Iterable[bytes]) -> None:
    """Tombstone records of the flow's batch log, so compaction removes them: runs records whose batch the
    metadata DB has committed, or the progress records of partitions ``airmirror reset`` re-seeds.  Returns
    once the target acknowledged all (:func:`~airmirror.kafka.records.write_records`)."""
    now = int(time.time() * 1000)
    write_records(flow, names.batch_log_topic(flow.source), (OutgoingRecord(key, None, now) for key in keys))
