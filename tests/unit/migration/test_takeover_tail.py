"""What MM2 leaves behind, decoded, and the tail walk that finds where its copy really ends."""

from __future__ import annotations

import json

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.migration.compared_record import Record
from airmirror.migration.takeover_tail import follow_tail, imported_syncs, mm2_copied_offsets, mm2_offset_syncs
from airmirror.mm2.wire_formats import OffsetSync
from airmirror.model import OffsetRun, PartitionKey


def offsets_record(
    connector: str, cluster: str, topic: str, partition: int, offset: int | None
) -> tuple[bytes, bytes | None]:
    key = json.dumps([connector, {"cluster": cluster, "partition": partition, "topic": topic}]).encode()
    return key, None if offset is None else json.dumps({"offset": offset}).encode()


def test_the_newest_stored_offset_of_the_source_connector_wins_and_a_null_deletes_it():
    records = [
        offsets_record("MirrorSourceConnector", "a", "orders", 0, 10),
        offsets_record("MirrorSourceConnector", "a", "orders", 0, 42),
        offsets_record("MirrorSourceConnector", "a", "orders", 1, 7),
        offsets_record("MirrorSourceConnector", "a", "orders", 1, None),
        offsets_record("MirrorCheckpointConnector", "a", "orders", 2, 0),
        offsets_record("MirrorSourceConnector", "c", "orders", 3, 5),
        (b"not json", b"{}"),
    ]
    assert mm2_copied_offsets("a", records) == {PartitionKey("orders", 0): 42}


def test_offset_syncs_keep_mm2s_order_and_the_anchor_is_the_last_written():
    written = [
        OffsetSync("t", 0, 0, 0),
        OffsetSync("t", 0, 100, 100),
        OffsetSync("t", 0, 150, 180),
        OffsetSync("t", 0, 160, 190),
    ]
    records = [(s.key(), s.value()) for s in written] + [(b"x", b"y")]
    syncs = mm2_offset_syncs(records)[PartitionKey("t", 0)]
    assert syncs == written
    anchor, imported = imported_syncs(written)
    assert anchor == written[-1] and imported == [written[0], written[1], written[2], written[3]]
    after_restart = [*written, OffsetSync("t", 0, 120, 200)]
    anchor, imported = imported_syncs(after_restart)
    assert anchor.upstream_offset == 120 and [s.upstream_offset for s in imported] == [0, 100, 120]


def records(offsets, label="r"):
    return [Record(o, f"{label}{o}".encode(), b"v", (), 1000 + o) for o in offsets]


def copies(source, downstream_start):
    return [Record(downstream_start + i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(source)]


def test_the_walk_finds_records_copied_past_the_stored_offset():
    source = records(range(50, 70))
    tail = follow_tail("a.t-0", iter(source), copies(source[:12], 500))
    assert tail.last_copied == 61 and tail.recopied == 0
    assert tail.runs == (OffsetRun(50, 62, 500),)


def test_the_walk_skips_source_holes_and_counts_mm2s_re_copies():
    source = records([50, 51, 53, 54, 55])
    target = copies([source[0], source[1], source[2], source[3], source[1], source[2], source[3], source[4]], 10)
    tail = follow_tail("a.t-0", iter(source), target)
    assert tail.last_copied == 55 and tail.recopied == 3
    assert tail.runs == (OffsetRun(50, 55, 10, holes=(52, 53)), OffsetRun(55, 56, 17))


def test_a_target_record_that_is_no_copy_fails_the_walk_naming_its_offset():
    source = records(range(5))
    target = [*copies(source[:2], 0), Record(2, b"intruder", b"v", (), 1)]
    with pytest.raises(ReplicationFailure, match=r"a\.t-0 offset 2 holds a record that is no copy"):
        follow_tail("a.t-0", iter(source), target)
