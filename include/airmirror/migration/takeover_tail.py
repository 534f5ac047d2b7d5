"""What MM2 left on the clusters, decoded, and where its copy of a partition really ends (``airmirror takeover``).
Pure logic: records come in as values and iterators.

Contract:
- **Source offsets.**  MM2's source connector stores, per source partition, the offset of the last record it
  copied, in its Connect offsets topic: key ``["MirrorSourceConnector", {"cluster": source, "partition": P,
  "topic": T}]``, value ``{"offset": N}`` (JSON); the newest record of a key wins and a null value deletes it.
  It commits them only every ``offset.flush.interval.ms`` (60 s by default), so N may lag what MM2 copied.
- **Offset syncs** (MM2's ``OffsetSync`` records): each says that source offset ``u`` was copied to target
  offset ``d``.  They are exact points, the newest one per partition the closest to where MM2 stopped.
- **The tail walk** finds where MM2's copy ends without trusting N: from the newest sync ``(u, d)``, the
  target's records from ``d`` on are matched, in order, with the source's records from ``u`` on (key, value,
  headers and timestamp).  A target record equal to an earlier source record of the walk is a re-copy (MM2
  is at-least-once: after a restart it copies again from its stored offset); any other target record fails
  the walk, naming its offset.  The walk gives exact runs for the first copy of each source offset, and the
  last source offset copied.  Memory grows with the tail (a 32-byte digest and an offset per source record
  from the newest sync on), never with the partition.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from airmirror.errors import ReplicationFailure
from airmirror.migration.compared_record import Record
from airmirror.migration.partition_compare import canonical_bytes
from airmirror.mm2.wire_formats import OffsetSync, WireFormatError
from airmirror.model import OffsetRun, PartitionKey
from airmirror.replication.offset_runs import build_runs

SOURCE_CONNECTOR = "MirrorSourceConnector"


def mm2_copied_offsets(source: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[PartitionKey, int]:
    """Per source partition, the offset of the last record MM2's source connector of cluster ``source`` stored as
    copied, from the ``(key, value)`` records of its offsets topic in log order (see the module contract).
    Records of other connectors or clusters, and keys that are not MM2's, are skipped."""
    copied: dict[PartitionKey, int] = {}
    for key, value in records:
        partition = _source_partition(source, key)
        if partition is None:
            continue
        offset = _stored_offset(value)
        if offset is None:
            copied.pop(partition, None)
        else:
            copied[partition] = offset
    return copied


def _source_partition(source: str, key: bytes | None) -> PartitionKey | None:
    try:
        connector, partition = json.loads(key or b"")
        if connector != SOURCE_CONNECTOR or partition.get("cluster") != source:
            return None
        return PartitionKey(str(partition["topic"]), int(partition["partition"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _stored_offset(value: bytes | None) -> int | None:
    if value is None:
        return None
    try:
        return int(json.loads(value)["offset"])
    except (ValueError, TypeError, KeyError):
        return None


def mm2_offset_syncs(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[PartitionKey, list[OffsetSync]]:
    """MM2's offset syncs per source partition in the order MM2 wrote them, from the records of its
    offset-syncs topic; records that are not offset syncs are skipped."""
    found: dict[PartitionKey, list[OffsetSync]] = {}
    for key, value in records:
        try:
            sync = OffsetSync.decode(key or b"", value or b"")
        except WireFormatError:
            continue
        found.setdefault(PartitionKey(sync.topic, sync.partition), []).append(sync)
    return found


def imported_syncs(written: list[OffsetSync]) -> tuple[OffsetSync, list[OffsetSync]]:
    """The anchor of a partition's tail walk, the last sync MM2 wrote (its last run's; after a restart MM2 copies
    again from its stored offset, so a sync with a higher upstream offset may be older), and the syncs to import:
    the newest one per upstream offset at or below the anchor's, by upstream offset."""
    anchor = written[-1]
    newest = {s.upstream_offset: s for s in written if s.upstream_offset <= anchor.upstream_offset}
    return anchor, [newest[u] for u in sorted(newest)]


@dataclass(frozen=True)
class Tail:
    """The outcome of a tail walk: exact runs of the first copy of each source offset from the anchor on, the
    last source offset copied (``None`` when the target held nothing from the anchor on) and how many target
    records were re-copies."""

    runs: tuple[OffsetRun, ...]
    last_copied: int | None
    recopied: int


def follow_tail(remote: str, source: Iterator[Record], target: Iterable[Record]) -> Tail:
    """Match ``target`` (the remote partition ``remote`` from the anchor's downstream offset to its end) with
    ``source`` (the source partition from the anchor's upstream offset on, read lazily), per the module
    contract.  Raises :class:`~airmirror.errors.ReplicationFailure` at the first target record that is no copy."""
    read: list[tuple[int, bytes]] = []
    positions: dict[bytes, list[int]] = {}
    mapped: list[tuple[int, int]] = []
    recopied = 0
    next_position = 0
    for record in target:
        digest = _digest(record)
        expected = _source_at(next_position, source, read, positions)
        if expected is not None and expected[1] == digest:
            position = next_position
        else:
            earlier = [p for p in positions.get(digest, []) if p < next_position]
            if not earlier:
                raise ReplicationFailure(
                    f"{remote} offset {record.offset} holds a record that is no copy of the source from MM2's last "
                    "offset sync on: MM2's copy cannot be continued exactly (was something else written into it?)"
                )
            position = earlier[-1]
        upstream = read[position][0]
        if mapped and upstream <= mapped[-1][0]:
            recopied += 1
        else:
            mapped.append((upstream, record.offset))
        next_position = position + 1
    return Tail(
        tuple(build_runs([u for u, _ in mapped], [d for _, d in mapped])), mapped[-1][0] if mapped else None, recopied
    )


def _source_at(
    position: int, source: Iterator[Record], read: list[tuple[int, bytes]], positions: dict[bytes, list[int]]
) -> tuple[int, bytes] | None:
    """The source record at ``position`` of the walk, reading the source up to it; ``None`` past its end."""
    while len(read) <= position:
        record = next(source, None)
        if record is None:
            return None
        digest = _digest(record)
        positions.setdefault(digest, []).append(len(read))
        read.append((record.offset, digest))
    return read[position]


def _digest(record: Record) -> bytes:
    return hashlib.sha256(canonical_bytes(record)).digest()
