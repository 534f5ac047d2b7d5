"""Plain value types passed between the planner, the Spark job, the checkpoint and heartbeat emitters and the
metadata store (:mod:`airmirror.store`), which stores and returns them.  No database code lives here.

Offsets follow Kafka's convention: a range ``[start, end)`` includes ``start`` and excludes ``end``;
a cursor is the next source offset to copy.  Timestamps are timezone-aware UTC.

Values that cross a process boundary as JSON (XCom, the spark-submit app's output, the replication view's
answers) are frozen dataclasses turned into JSON by :func:`to_json` and read back by :func:`from_json`, the
one place that does either (see :func:`from_json` for what it accepts).
"""

from __future__ import annotations

import enum
import functools
import sys
import types
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, Union, cast, get_args, get_origin, get_type_hints

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Json: TypeAlias = str | int | float | bool | list["Json"] | dict[str, "Json"] | None
"""A JSON value, as :func:`json.loads` returns it.  At run time its self-reference resolves only in a module
that imports ``Json`` itself (:func:`typing.get_type_hints` of an annotation naming :data:`JsonObject`)."""
JsonObject: TypeAlias = dict[str, Json]
T = TypeVar("T")


class JsonShapeError(ValueError):
    """JSON read back (:func:`from_json`) that is not the value it should be.  The message names the expected
    type and where in the value it went wrong, never a value read (a value may be anything)."""


def to_json(value: object) -> Json:
    """``value`` as JSON: a dataclass as an object of its fields, an enum as its value, a datetime in ISO-8601,
    a list or tuple as an array, a mapping with string keys as an object; ``TypeError`` for anything else."""
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return json_object(value)
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return {key: to_json(item) for key, item in value.items()}
    raise TypeError(f"a {type(value).__name__} has no JSON form")


def json_object(record: DataclassInstance) -> JsonObject:
    """The JSON object of a dataclass: each field under its name, as :func:`to_json` turns it."""
    return {f.name: to_json(getattr(record, f.name)) for f in fields(record)}


def from_json(kind: type[T], data: object) -> T:
    """``data`` (parsed JSON) read back as a ``kind``, strictly: a dataclass needs an object with exactly its
    fields (no key missing, none unknown), each read as its annotation says; ``X | None``, ``list[X]``,
    ``tuple[X, ...]``, ``dict[str, X]``, enums (by value), datetimes (ISO-8601), ``str``, ``int``, ``float``
    and ``bool`` (never an ``int``) are read back as :func:`to_json` wrote them.  Anything else raises
    :class:`JsonShapeError`."""
    return cast(T, _read(kind, data, getattr(kind, "__name__", str(kind))))


def _read(kind: Any, data: object, path: str) -> object:
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        for arm in (arm for arm in args if arm is not type(None)):
            try:
                return _read(arm, data, path)
            except JsonShapeError:
                continue
        raise _unexpected(path, kind, data)
    if origin is list or origin is tuple:
        item_kind = args[0]
        if not isinstance(data, list) or (origin is tuple and args[1:] != (Ellipsis,)):
            raise _unexpected(path, kind, data)
        items = [_read(item_kind, item, f"{path}[{index}]") for index, item in enumerate(data)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(data, dict) or args[0] is not str:
            raise _unexpected(path, kind, data)
        return {key: _read(args[1], item, f"{path}[{key!r}]") for key, item in data.items()}
    if isinstance(kind, type) and is_dataclass(kind):
        return _read_dataclass(kind, data, path)
    return _read_scalar(kind, data, path)


def _read_dataclass(kind: type[Any], data: object, path: str) -> object:
    if not isinstance(data, dict):
        raise _unexpected(path, kind, data)
    hints = _field_types(kind)
    unknown, missing = sorted(set(data) - set(hints)), sorted(set(hints) - set(data))
    if unknown or missing:
        raise JsonShapeError(
            f"{path}: a {kind.__name__} needs exactly its fields; unknown {unknown}, missing {missing}"
        )
    return kind(**{name: _read(hint, data[name], f"{path}.{name}") for name, hint in hints.items()})


def _read_scalar(kind: Any, data: object, path: str) -> object:
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(data)
        except ValueError:
            raise _unexpected(path, kind, data) from None
    if kind is datetime:
        if isinstance(data, str):
            try:
                return datetime.fromisoformat(data)
            except ValueError:
                pass
        raise _unexpected(path, kind, data)
    if kind is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if kind in (str, int, bool) and isinstance(data, kind) and (kind is bool or not isinstance(data, bool)):
        return data
    if kind is type(None) and data is None:
        return None
    if kind in (str, int, float, bool, type(None)):
        raise _unexpected(path, kind, data)
    raise TypeError(f"{path}: {kind!r} has no JSON form")


def _field_types(kind: type[Any]) -> dict[str, Any]:
    """The resolved annotation of each init field of dataclass ``kind``."""
    hints = get_type_hints(kind)
    return {f.name: hints[f.name] for f in fields(kind) if f.init}


def _unexpected(path: str, kind: Any, data: object) -> JsonShapeError:
    found = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    described = found.get(type(data), "a number" if isinstance(data, int | float) else type(data).__name__)
    expected = getattr(kind, "__name__", None) if get_origin(kind) is None else None
    return JsonShapeError(f"{path}: expected {expected or kind}, got {described}")


@dataclass(frozen=True, order=True)
class PartitionKey:
    """A source topic-partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class MirroredRecord:
    """A record as a Python transform (``airmirror.transforms.Python``, :mod:`airmirror.config.transforms`) sees it:
    the remote topic and partition it is copied to, its timestamp (ms), key, value and headers (``(name, bytes |
    None)`` pairs, in order).  The function returns one (``dataclasses.replace(record, value=...)``) or ``None`` to
    drop the record; only key, value and headers may differ."""

    topic: str
    partition: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class PartitionOffsets:
    """What the source broker reported for one partition at planning time."""

    log_start: int
    stable_end: int
    until_offset: int | None = None
    start_offset: int | None = None
    topic_id: str | None = None
    leader_epoch: int | None = None


@dataclass(frozen=True)
class OffsetRun:
    """Where copied source records landed on the target: an **exact** run, or a **folded** one.

    *Exact* (``downstream_end`` is ``None``): the source records in ``[upstream_start, upstream_end)`` were copied, in
    order, to consecutive downstream offsets from ``downstream_start`` on, except those in its *holes*: ``holes`` is
    ``(start, end, start, end, ...)``, sorted, disjoint and non-adjacent upstream ranges past ``upstream_start`` and up
    to ``upstream_end`` (a run cut by a truncation may end in one) that hold no copy (records a transform dropped or a
    dead-letter queue took, compaction holes, the source's transaction markers and aborted records).  So the run's
    copies are ``length - skipped`` and its downstream offsets ``[downstream_start, downstream_start + copies)``: a copy
    task's chunk (one transaction, so consecutive on the target) yields one run per partition however many records it
    dropped, and what the holes cost is a pair of integers each (:func:`packed_holes` stores them compressed).
    Downstream gaps (commit markers, another writer's records) start a new run.

    *Folded* (``downstream_end`` and ``records`` set, no holes; see :mod:`airmirror.store.retention`): consecutive
    exact runs merged so that a partition's run count stays bounded.  The copies of the source records in
    ``[upstream_start, upstream_end)``, ``records`` of them, lie in order in ``[downstream_start, downstream_end)``:
    the record at ``upstream_start`` was copied to ``downstream_start``, the last copy is at ``downstream_end - 1``.
    Which offset each copy in between has is no longer known: ``length - records`` source offsets of the run hold
    no copied record and ``downstream_length - records`` downstream offsets hold no copy (commit markers,
    aborted records).  ``records`` may understate the copies (a folded run cut by a truncation keeps a lower
    bound), never overstate them.

    :meth:`downstream_at_most` and :meth:`upstream_at_most` are the translation rules through one run: exact for
    an exact run, never past the exact position for a folded one.
    """

    upstream_start: int
    upstream_end: int
    downstream_start: int
    downstream_end: int | None = None
    records: int | None = None
    holes: tuple[int, ...] = ()

    @property
    def length(self) -> int:
        """The number of upstream offsets the run spans."""
        return self.upstream_end - self.upstream_start

    @property
    def exact(self) -> bool:
        return self.downstream_end is None

    @property
    def skipped(self) -> int:
        """The upstream offsets of an exact run that hold no copy (its holes' lengths)."""
        return self._hole_index[1][-1]

    @property
    def downstream_stop(self) -> int:
        """One past the run's last downstream offset."""
        return self.downstream_start + self.copies if self.downstream_end is None else self.downstream_end

    @property
    def downstream_length(self) -> int:
        return self.downstream_stop - self.downstream_start

    @property
    def copies(self) -> int:
        """The number of copied records in the run (a lower bound for a folded run)."""
        return self.length - self.skipped if self.records is None else self.records

    def copies_below(self, upstream_offset: int) -> int:
        """For an exact run: how many of its copies are of source offsets below ``upstream_offset``."""
        offset = min(max(upstream_offset, self.upstream_start), self.upstream_end)
        starts, skipped_before = self._hole_index
        index = bisect_right(starts, offset) - 1
        skipped = skipped_before[index] + min(offset, self.holes[2 * index + 1]) - starts[index] if index >= 0 else 0
        return offset - self.upstream_start - skipped

    def copied(self, upstream_offset: int) -> bool:
        """For an exact run: whether the record at ``upstream_offset`` (inside the run) was copied."""
        return self.copies_below(upstream_offset + 1) > self.copies_below(upstream_offset)

    def upstream_of_copy(self, index: int) -> int:
        """For an exact run and ``0 <= index < copies``: the source offset of its ``index``-th copy."""
        starts, skipped_before = self._hole_index
        # hole j lies below the copy when fewer copies than ``index`` precede it: a binary search over j
        low, high = 0, len(starts)
        while low < high:
            middle = (low + high) // 2
            if starts[middle] - self.upstream_start - skipped_before[middle] <= index:
                low = middle + 1
            else:
                high = middle
        return self.upstream_start + index + skipped_before[low]

    def downstream_at_most(self, upstream_offset: int) -> int:
        """For ``upstream_start <= upstream_offset < upstream_end``: the downstream position of the first copy at
        or after ``upstream_offset``, exactly for an exact run; for a folded run a position at or before it
        (``downstream_start`` plus the copies the run must hold below ``upstream_offset``: at least one, and at
        least the offsets below it less those that may hold no copy)."""
        below = upstream_offset - self.upstream_start
        if below <= 0:
            return self.downstream_start
        if self.exact:
            return self.downstream_start + self.copies_below(upstream_offset)
        return self.downstream_start + max(1, below - (self.length - self.copies))

    def upstream_at_most(self, downstream_offset: int) -> int:
        """For ``downstream_start <= downstream_offset < downstream_stop``: the upstream offset of the record whose
        copy is the first at or after ``downstream_offset``, exactly for an exact run; at or before it for a
        folded one (the mirror image of :meth:`downstream_at_most`)."""
        below = downstream_offset - self.downstream_start
        if below <= 0:
            return self.upstream_start
        if self.exact:
            return self.upstream_of_copy(below)
        return self.upstream_start + max(1, below - (self.downstream_length - self.copies))

    @functools.cached_property
    def _hole_index(self) -> tuple[list[int], list[int]]:
        """The holes' starts, and per hole the offsets skipped by the holes before it (one more entry: all)."""
        starts = list(self.holes[0::2])
        skipped = [0, *accumulate(end - start for start, end in zip(starts, self.holes[1::2], strict=True))]
        return starts, skipped


def packed_holes(holes: Sequence[int]) -> bytes | None:
    """``holes`` (:attr:`OffsetRun.holes`) as compressed bytes, ``None`` for none: each offset as its distance from
    the one before it (the first as itself), 8 bytes each, then zlib, so a regular pattern of drops costs next to
    nothing.  :func:`unpacked_holes` reads it back."""
    if not holes:
        return None
    deltas = array("q", [holes[0], *(b - a for a, b in pairwise(holes))])
    if sys.byteorder != "little":
        deltas.byteswap()
    return zlib.compress(deltas.tobytes(), 1)


def unpacked_holes(packed: bytes | None) -> tuple[int, ...]:
    """The holes :func:`packed_holes` packed (``()`` for ``None``)."""
    if not packed:
        return ()
    deltas = array("q")
    deltas.frombytes(zlib.decompress(packed))
    if sys.byteorder != "little":
        deltas.byteswap()
    return tuple(accumulate(deltas))


@dataclass(frozen=True)
class Gap:
    """Source offsets ``[start, end)`` that retention deleted before they were copied."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class ContinuesCursor:
    """A range that continues the partition's stored cursor, or starts its first copy (no cursor is stored)."""


@dataclass(frozen=True)
class MovesCursor:
    """A range that replaces the stored ``cursor`` the user moved (``start_from`` with ``reset_cursor``); the move
    commits with the batch."""

    cursor: int


@dataclass(frozen=True)
class ResetsCursor:
    """A range that starts afresh because the stored ``cursor`` belonged to an earlier incarnation of the source
    topic, or pointed above a truncated log (:mod:`airmirror.replication.plan_arithmetic`).  The batch's commit
    records a source reset and starts a new generation of the partition's offset-sync runs.  ``truncated_at`` is
    where leader epochs showed the source log diverged below the cursor (an unclean leader election): the range
    starts there, and the reset keeps the runs below it."""

    cursor: int
    truncated_at: int | None = None


RangeStart: TypeAlias = ContinuesCursor | MovesCursor | ResetsCursor
"""How a planned range starts against the partition's stored cursor."""


@dataclass(frozen=True, kw_only=True)
class PlannedRange:
    """What one batch copies from one source partition: source offsets ``[start, end)``, started as ``begins``
    says.

    ``gap_start`` is set when retention deleted offsets before they were copied: ``[gap_start, start)`` is
    recorded as a :class:`Gap` when the batch commits.  ``source_topic_id`` is the source topic's id at planning
    time (``None`` when the broker gave none).  ``start_epoch`` is the source leader epoch of the record just
    before ``start`` (the stored cursor's), when known: the range read validates its start against it (KIP-320),
    so a log truncated below ``start`` is never read past.
    """

    topic: str
    partition: int
    start: int
    end: int
    remote_topic: str
    gap_start: int | None = None
    begins: RangeStart = ContinuesCursor()
    source_topic_id: str | None = None
    start_epoch: int | None = None

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def planned_from(self) -> int:
        """The stored cursor this range was planned from, which must still stand when it commits: the one it
        moves or resets, else the one below the gap retention made (``gap_start``), else ``start``."""
        match self.begins:
            case MovesCursor(cursor=cursor) | ResetsCursor(cursor=cursor):
                return cursor
            case ContinuesCursor():
                return self.start if self.gap_start is None else self.gap_start

    def gap(self) -> Gap | None:
        if self.gap_start is None or self.gap_start >= self.start:
            return None
        return Gap(self.topic, self.partition, self.gap_start, self.start)

    def empty_result(self) -> RangeResult:
        """The result of this range when it is empty (``start == end``): nothing copied, no runs, and the leader
        epoch before ``start`` (``start_epoch``) carried on as ``end_epoch``, so the cursor keeps it.  A range with
        records has no such result: :class:`ValueError`."""
        if self.size != 0:
            raise ValueError(f"range [{self.start}, {self.end}) of {self.key} is not empty")
        return RangeResult(
            topic=self.topic,
            partition=self.partition,
            start=self.start,
            end=self.end,
            records=0,
            bytes=0,
            end_epoch=self.start_epoch,
        )


@dataclass(frozen=True)
class CursorState:
    """A stored cursor, the source topic id (incarnation) it belongs to and the source leader epoch of the
    record before it (``None`` when unknown)."""

    next_offset: int
    source_topic_id: str | None
    leader_epoch: int | None = None


@dataclass(frozen=True)
class Stop:
    """Why replication of a source topic (``partition`` ``None``: all of it) or partition is stopped."""

    topic: str
    partition: int | None
    reason: str
    stopped_at: datetime


@dataclass(frozen=True)
class LeaderWait:
    """A source partition that has had no leader ``since`` then (``reason``: the broker's error): the flow's plans
    leave it where it stands, and copy the others."""

    topic: str
    partition: int
    since: datetime
    reason: str

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.topic, self.partition)


@dataclass(frozen=True)
class SourceReset:
    """A source partition that started again in a new incarnation, abandoning ``old_cursor``."""

    topic: str
    partition: int
    batch_id: int
    old_topic_id: str | None
    new_topic_id: str | None
    old_cursor: int
    new_start: int
    reset_at: datetime


@dataclass(frozen=True, kw_only=True)
class RangeCopied:
    """What one copy task's attempt copied of one range, as the Spark job returns it to the driver: a summary for
    the log and the caller; the batch log holds the authoritative results (:class:`RangeResult`)."""

    topic: str
    partition: int
    records: int
    bytes: int


@dataclass(frozen=True, kw_only=True)
class RangeResult:
    """The outcome of copying one :class:`PlannedRange`, as committed to Kafka.

    ``records``/``bytes`` count what was written; ``runs`` map every copied upstream offset to its
    downstream offset.  ``downstream_end`` is the target offset after the last copied record
    (``None`` when nothing was copied).  ``end_epoch`` is the source leader epoch of the record at ``end - 1``
    when known: it goes with the cursor, for the next range's start validation.  ``schema_passed`` counts the
    records copied unchanged because their schema id was unknown (``airmirror.schema.unknown = pass``), ``filtered``
    the source records the flow's transforms dropped (read, never written: ``end - start`` is ``records``, plus
    ``filtered``, plus ``skipped``, plus offsets holding no record); ``skipped`` the records a transform could not
    process that ``errors.tolerance = all`` skipped.
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
    schema_passed: int = 0
    filtered: int = 0
    skipped: int = 0


def utc_text(moment: datetime) -> str:
    """``moment`` as people read it in messages and pages: UTC to the second, ``2026-11-29T07:30:44Z``."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class RunFailure:
    """A run of a flow that failed: when, and the error it showed its user."""

    failed_at: datetime
    error: str


class BatchState(str, enum.Enum):
    """Life cycle of a batch: ``RUNNING`` until it is committed or abandoned (``FAILED``)."""

    RUNNING = "RUNNING"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"


class GroupSyncOutcome(str, enum.Enum):
    """What a group offset sync did on the target cluster."""

    SYNCED = "SYNCED"
    UP_TO_DATE = "UP_TO_DATE"
    SKIPPED_ACTIVE = "SKIPPED_ACTIVE"
    FAILED = "FAILED"


@dataclass(frozen=True)
class NoJobYet:
    """A batch whose first copy job has not run: no attempt of it can be at work, and the batch log holds nothing
    of it, so a lookup of its progress scans nothing."""

    @property
    def scan_from(self) -> int | None:
        return None


@dataclass(frozen=True)
class PerPartitionJobs:
    """A batch whose job ran under an earlier airmirror, whose copy tasks each copied one partition under a
    transactional id of its own (:func:`airmirror.names.transactional_id`) and stored no log floor: a lookup scans
    the batch log from its start."""

    @property
    def scan_from(self) -> int | None:
        return 0


@dataclass(frozen=True)
class TaskJobs:
    """A batch whose latest copy job ran ``tasks`` copy tasks.  ``log_floor`` is the batch log's high watermark
    before its first copy job, below which the log holds nothing of the batch
    (:mod:`airmirror.replication.spark.batch_log`); ``None`` when an earlier airmirror ran that job, and a lookup
    scans from the log's start."""

    tasks: int
    log_floor: int | None = None

    @property
    def scan_from(self) -> int | None:
        return 0 if self.log_floor is None else self.log_floor


BatchJobs: TypeAlias = NoJobYet | PerPartitionJobs | TaskJobs
"""What a stored batch's copy jobs left behind: which attempts may still be at work, and where the batch log holds
the batch's records (``scan_from``: where a lookup of its progress scans from, ``None``: nowhere)."""


@dataclass(frozen=True)
class BatchRecord:
    """A batch as stored.  ``records``/``bytes`` are totals, set once the batch is committed; ``jobs`` is what its
    copy jobs left behind."""

    id: int
    flow: str
    state: BatchState
    created_at: datetime
    finished_at: datetime | None
    params: JsonObject
    ranges: list[PlannedRange]
    records: int | None
    bytes: int | None
    error: str | None
    jobs: BatchJobs = NoJobYet()


@dataclass(frozen=True)
class StoredJobs:
    """A stored batch's id with what its copy jobs left behind (:class:`BatchRecord`): what fencing its attempts
    and looking up its progress need."""

    batch_id: int
    jobs: BatchJobs


@dataclass(frozen=True)
class TopicCopied:
    """How many records (and bytes) of source topic ``topic`` some batches copied."""

    topic: str
    records: int
    bytes: int


@dataclass(frozen=True)
class CopiedSince:
    """What a flow's batches committed from a given batch on copied: the newest of them (``None``: none) and
    the totals per source topic."""

    last_batch_id: int | None
    topics: list[TopicCopied]

    @property
    def records(self) -> int:
        return sum(t.records for t in self.topics)

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.topics)


@dataclass(frozen=True)
class PartitionStats:
    """Replication status of one source partition of a flow, as shown by ``airmirror status``.

    ``records``/``bytes`` total every committed batch; ``gap_offsets`` is how many source offsets
    retention deleted before they were copied, over ``gap_count`` gaps; ``filtered`` how many records the flow's
    transforms dropped, ``skipped`` how many records ``errors.tolerance = all`` skipped.
    """

    cursor: int
    records: int
    bytes: int
    last_batch_id: int
    last_batch_at: datetime
    gap_count: int
    gap_offsets: int
    filtered: int = 0
    skipped: int = 0


@dataclass(frozen=True)
class SyncedSubject:
    """A source registry subject a flow's schema sync copied: its name on the target and the versions copied."""

    subject: str
    target_subject: str
    versions: int
    synced_at: datetime


@dataclass(frozen=True)
class StoredCheckpoint:
    """The newest checkpoint of a group on one source partition, as written to the target.

    ``topic`` is the topic the group committed on (source cluster); ``remote_topic`` is the topic the
    checkpoint names on the target.  ``metadata`` is the group's commit metadata.
    """

    group: str
    topic: str
    partition: int
    remote_topic: str
    upstream_offset: int
    downstream_offset: int
    metadata: str
    emitted_at: datetime

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.topic, self.partition)


@dataclass(frozen=True)
class GroupSyncRecord:
    """The newest group offset sync of a group on the target: what happened and why."""

    group: str
    outcome: GroupSyncOutcome
    target_state: str
    offsets_committed: int
    detail: str
    synced_at: datetime


@dataclass(frozen=True)
class HeartbeatLatency:
    """Replication latency seen from the newest copied heartbeat of flow ``source_alias->target_alias``:
    ``latency_ms`` = ``observed_at`` (the batch commit) - ``heartbeat_at`` (the heartbeat's timestamp)."""

    source_alias: str
    target_alias: str
    heartbeat_at: datetime
    observed_at: datetime
    latency_ms: int


@dataclass(frozen=True)
class LagSample:
    """How far one source partition's replication stood at ``sampled_at``: ``lag_records`` (last stable offset
    minus the next offset to copy), ``record_age_ms`` (age of the oldest record not yet copied; ``None`` when
    none is waiting) and ``replication_latency_ms`` (the flow's newest latency observed from heartbeats, MM2's
    ``replication-latency-ms``; ``None`` before the first)."""

    topic: str
    partition: int
    sampled_at: datetime
    lag_records: int
    record_age_ms: int | None
    replication_latency_ms: int | None

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.topic, self.partition)


@dataclass(frozen=True)
class HeartbeatEmission:
    """The newest heartbeat a flow wrote to ``topic`` on its target, with the heartbeat's timestamp."""

    topic: str
    heartbeat_at: datetime


class Verdict(str, enum.Enum):
    """How one partition's target compares with its source over the replicated range (``airmirror verify``).

    The first four and ``schema_id`` come from comparing records.  The others say why a partition with a cursor
    could not be compared at all; none of them is ``equal``: a verification that could not look at data never
    proves it.
    """

    EQUAL = "equal"
    MISSING = "missing"
    EXTRA = "extra"
    DIFFERENT = "different"
    STOPPED = "stopped"
    SOURCE_DELETED = "source_deleted"
    SOURCE_RECREATED = "source_recreated"
    TARGET_DELETED = "target_deleted"
    TARGET_RECREATED = "target_recreated"
    NO_RUNS = "no_runs"
    SCHEMA_ID = "schema_id"
    """A copy equal to its source record but for a schema id the flow's id map does not explain (compared records,
    ``airmirror.schema.ids = translate``)."""


@dataclass(frozen=True)
class ComparisonFigures:
    """What comparing a source partition with its remote partition found.

    ``verdict`` is the first difference found in target order; ``first_offset`` is where: a source offset for
    ``missing`` and ``different``, a target offset for ``extra``, ``None`` when ``equal``.  ``missing``,
    ``extra`` and ``different`` count every difference; ``compacted_source`` and ``compacted_target`` count
    records absent on one side that compaction of that side explains (a tombstone, or a key written again
    later), which are not differences.  The digests are SHA-256, in offset order, over each side's records
    compared (key, value, headers, timestamp).

    With ``airmirror.schema.ids = translate``, a source record is compared as the copy should hold it, its schema ids
    mapped through the flow's id map (the source digest too); ``schema_id`` counts copies that differ from that only
    in a schema id: unmapped, or another than the map gives.  ``schema_id_difference`` names the first of them in
    words (source offset, side, source id, mapped id or ``unmapped``, the id the copy holds).

    With a flow's transforms (:mod:`airmirror.config.transforms`), a source record is compared as the copy job writes
    it, after the chain; ``filtered`` counts the source records the chain drops, which are not differences and are
    left out of ``source_records`` and the source digest.
    """

    verdict: Verdict
    first_offset: int | None
    source_records: int
    target_records: int
    missing: int = 0
    extra: int = 0
    different: int = 0
    compacted_source: int = 0
    compacted_target: int = 0
    source_digest: str = ""
    target_digest: str = ""
    schema_id: int = 0
    schema_id_difference: str = ""
    filtered: int = 0


@dataclass(frozen=True, kw_only=True)
class PartitionVerification(ComparisonFigures):
    """The comparison of one source partition with its remote partition: the source range ``[source_start,
    source_end)`` (the replicated offsets still in the source log, up to the cursor) with the target range
    ``[target_start, target_end)`` (their copies, up to the remote partition's last stable offset), through the
    exact offset-sync runs; ``note`` says what retention left out, ``reason`` why the verdict is not ``equal``
    (empty when it is).  A partition that could not be compared has empty ranges at its cursor and no
    records."""

    topic: str
    partition: int
    remote_topic: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int
    note: str = ""
    reason: str = ""

    @property
    def key(self) -> PartitionKey:
        return PartitionKey(self.topic, self.partition)


@dataclass(frozen=True)
class Verification:
    """One ``airmirror verify`` of a flow: when it ran, which topics it covered (``topics_regex``; ``None`` for
    all) and the result per partition."""

    flow: str
    verified_at: datetime
    topics_regex: str | None
    partitions: list[PartitionVerification]
    id: int | None = None

    @property
    def equal(self) -> bool:
        return all(p.verdict is Verdict.EQUAL for p in self.partitions)

    def counts(self) -> dict[str, int]:
        """How many partitions got each verdict, every verdict listed."""
        return {v.value: sum(p.verdict is v for p in self.partitions) for v in Verdict}

    def as_dict(self) -> JsonObject:
        """The verification as JSON (verdicts as strings, the time in ISO-8601), with ``equal`` and the
        ``verdicts`` counted, for ``--json``, XCom and ``status``; written only, never read back."""
        return {
            "id": self.id,
            "flow": self.flow,
            "verified_at": self.verified_at.isoformat(),
            "topics": self.topics_regex,
            "equal": self.equal,
            "verdicts": to_json(self.counts()),
            "partitions": to_json(self.partitions),
        }
