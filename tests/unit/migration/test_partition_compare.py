"""The record-by-record comparison behind ``airmirror verify``: every verdict, compaction, first offsets, and
records compared through a schema id map."""

from __future__ import annotations

import pickle
import struct

from airmirror.config.transforms import FieldEdit, Predicate, PredicateKind, Step, StepKind
from airmirror.config.transforms import Side as Part
from airmirror.migration.compared_record import Record
from airmirror.migration.partition_compare import (
    Lost,
    RunMap,
    SchemaIdMap,
    compare_partition,
    verdict_reason,
)
from airmirror.model import OffsetRun, Verdict
from airmirror.replication.spark.record_transforms import RecordTransforms
from airmirror.schemas.framing import Side


def record(offset: int, key: str | None, value: str | None = "v", headers=(), timestamp: int = 1000) -> Record:
    return Record(
        offset,
        None if key is None else key.encode(),
        None if value is None else value.encode(),
        tuple(headers),
        timestamp,
    )


def shifted(records: list[Record], by: int) -> list[Record]:
    return [Record(r.offset + by, r.key, r.value, r.headers, r.timestamp) for r in records]


SOURCE = [record(o, f"k{o}") for o in range(10)]
RUNS = [OffsetRun(0, 10, 100)]


def compare(source, target, runs=RUNS, **kwargs):
    return compare_partition(
        runs,
        source,
        target,
        source_compacted=kwargs.pop("source_compacted", False),
        target_compacted=kwargs.pop("target_compacted", False),
        **kwargs,
    )


def test_an_exact_copy_is_equal_with_equal_digests():
    result = compare(SOURCE, shifted(SOURCE, 100))
    assert (result.verdict, result.first_offset, result.source_records, result.target_records) == (
        Verdict.EQUAL,
        None,
        10,
        10,
    )
    assert result.source_digest == result.target_digest


def test_a_record_written_into_the_target_is_extra_at_its_target_offset():
    result = compare(SOURCE, [*shifted(SOURCE, 100), record(110, "intruder")])
    assert (result.verdict, result.first_offset, result.extra) == (Verdict.EXTRA, 110, 1)


def test_source_records_no_run_covers_are_missing_from_the_first_one():
    runs = [OffsetRun(0, 4, 100), OffsetRun(7, 10, 104)]
    target = [record(100 + o, f"k{o}") for o in range(4)] + [record(104 + o - 7, f"k{o}") for o in range(7, 10)]
    result = compare(SOURCE, target, runs)
    assert (result.verdict, result.first_offset, result.missing) == (Verdict.MISSING, 4, 3)


def test_a_lost_copy_is_missing_at_its_source_offset():
    target = [r for r in shifted(SOURCE, 100) if r.offset != 105]
    result = compare(SOURCE, target)
    assert (result.verdict, result.first_offset, result.missing) == (Verdict.MISSING, 5, 1)


def test_a_changed_value_header_or_timestamp_is_different_at_the_source_offset():
    for changed in (
        record(103, "k3", "other"),
        record(103, "k3", headers=[("h", b"1")]),
        record(103, "k3", timestamp=7),
    ):
        target = [changed if r.offset == 103 else r for r in shifted(SOURCE, 100)]
        result = compare(SOURCE, target)
        assert (result.verdict, result.first_offset, result.different) == (Verdict.DIFFERENT, 3, 1)
        assert result.source_digest != result.target_digest


def test_the_first_difference_in_target_order_is_the_verdict_and_all_are_counted():
    target = [record(103, "k3", "other") if r.offset == 103 else r for r in shifted(SOURCE, 100) if r.offset != 107] + [
        record(110, "x")
    ]
    result = compare(SOURCE, target)
    assert (result.verdict, result.first_offset) == (Verdict.DIFFERENT, 3)
    assert (result.missing, result.extra, result.different) == (1, 1, 1)


def test_source_compaction_after_the_copy_is_compaction_not_extra():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(10)]
    target = shifted(source, 100)
    compacted = [r for r in source if r.offset >= 7]  # the cleaner kept the newest record of each key
    result = compare(compacted, target, source_compacted=True)
    assert (result.verdict, result.compacted_source, result.extra) == (Verdict.EQUAL, 7, 0)


def test_target_compaction_and_dropped_tombstones_are_compaction_not_missing():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(9)] + [record(9, "gone", None)]
    compacted = [r for r in shifted(source, 100) if r.offset >= 106 and r.value is not None]
    result = compare(source, compacted, target_compacted=True)
    assert (result.verdict, result.compacted_target, result.missing) == (Verdict.EQUAL, 7, 0)


def test_a_key_written_again_only_beyond_the_compared_range_still_explains_compaction():
    source = [record(o, "k") for o in range(3)]
    runs = [OffsetRun(0, 3, 0)]
    target = [record(2, "k")]
    result = compare(source, target, runs, target_compacted=True, target_later_keys=lambda: iter([b"other", b"k"]))
    assert (result.verdict, result.compacted_target) == (Verdict.EQUAL, 2)


def test_an_absence_no_later_key_explains_is_a_difference_even_on_a_compacted_topic():
    source = [record(o, f"k{o}") for o in range(3)]
    target = [r for r in shifted(source, 100) if r.offset != 101]
    result = compare(source, target, [OffsetRun(0, 3, 100)], target_compacted=True)
    assert (result.verdict, result.first_offset, result.missing) == (Verdict.MISSING, 1, 1)


def test_run_map_translates_both_ways_and_nothing_outside_runs():
    mapping = RunMap([OffsetRun(5, 8, 0), OffsetRun(10, 12, 3)])
    assert [mapping.to_target(o) for o in (4, 5, 7, 8, 10, 11, 12)] == [None, 0, 2, None, 3, 4, None]
    assert [mapping.to_source(o) for o in (0, 2, 3, 4, 5)] == [5, 7, 10, 11, None]


# A folded run: source offsets 0..9 copied, in order, to target offsets 100..111 with commit markers at 103 and 107.
COPY_OFFSETS = [100, 101, 102, 104, 105, 106, 108, 109, 110, 111]
FOLDED = [OffsetRun(0, 10, 100, 112, 10)]


def copied(source: list[Record], offsets=COPY_OFFSETS) -> list[Record]:
    """The copies of ``source`` at target ``offsets`` (in order)."""
    return [Record(o, r.key, r.value, r.headers, r.timestamp) for r, o in zip(source, offsets, strict=True)]


def test_a_folded_run_whose_sides_hold_every_record_is_equal():
    result = compare(SOURCE, copied(SOURCE), FOLDED)

    assert (result.verdict, result.source_records, result.target_records) == (Verdict.EQUAL, 10, 10)
    assert result.source_digest == result.target_digest


def test_a_changed_copy_in_a_folded_run_is_different_at_its_source_offset():
    target = copied([record(5, "k5", "other") if r.offset == 5 else r for r in SOURCE])

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.different, result.missing, result.extra) == (
        Verdict.DIFFERENT,
        5,
        1,
        0,
        0,
    )


def test_a_copy_dropped_in_the_middle_of_a_folded_run_is_missing_at_its_source_offset():
    target = [r for r in copied(SOURCE) if r.offset != 105]

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.missing, result.different, result.extra) == (
        Verdict.MISSING,
        4,
        1,
        0,
        0,
    )


def test_a_record_written_into_a_folded_run_is_extra_at_its_target_offset():
    target = sorted([*copied(SOURCE), record(107, "intruder")], key=lambda r: r.offset)

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.extra, result.missing, result.different) == (
        Verdict.EXTRA,
        107,
        1,
        0,
        0,
    )


def test_both_sides_short_of_the_records_a_folded_run_copied_is_never_equal():
    source = [r for r in SOURCE if r.offset != 4]
    target = copied(source, [o for o in COPY_OFFSETS if o != 105])

    result = compare(source, target, FOLDED)

    assert (result.verdict, result.first_offset) == (Verdict.MISSING, 0)


def test_every_copy_of_a_folded_run_after_a_dropped_one_is_not_paired_with_the_wrong_record():
    target = [r for r in copied(SOURCE) if r.offset not in (101, 109)]

    result = compare(SOURCE, target, FOLDED)

    assert (result.verdict, result.first_offset, result.missing, result.different, result.extra) == (
        Verdict.MISSING,
        1,
        2,
        0,
        0,
    )


def test_folded_and_exact_runs_are_compared_each_in_their_own_way():
    source = [record(o, f"k{o}") for o in range(15)]
    runs = [*FOLDED, OffsetRun(10, 15, 113)]
    target = copied(source[:10]) + [record(113 + o - 10, f"k{o}") for o in range(10, 15)]

    assert compare(source, target, runs).verdict is Verdict.EQUAL
    shifted_exact = copied(source[:10]) + [record(112 + o - 10, f"k{o}") for o in range(10, 15)]
    assert compare(source, shifted_exact, runs).verdict is not Verdict.EQUAL


def test_a_target_log_start_inside_a_folded_run_aligns_by_content_and_the_rest_is_compared():
    target = [r for r in copied(SOURCE) if r.offset >= 104]  # the target's log start fell inside the run
    lost, excused = Lost("target", 0, 10, -1), Lost("target", 0, 10, 0)

    missing = compare(SOURCE, target, FOLDED, lost=lost)
    equal = compare(SOURCE, target, FOLDED, lost=excused)
    changed = compare(
        SOURCE, [record(108, "k6", "other") if r.offset == 108 else r for r in target], FOLDED, lost=excused
    )

    assert (missing.verdict, missing.first_offset, missing.missing, lost.records) == (Verdict.MISSING, 0, 3, 3)
    assert (equal.verdict, equal.missing, excused.records, equal.target_records) == (Verdict.EQUAL, 0, 3, 7)
    assert (changed.verdict, changed.first_offset) == (Verdict.DIFFERENT, 6)


def test_a_source_log_start_inside_a_contiguous_folded_run_is_pinned_by_its_offset():
    lost = Lost("source", 0, 3, -1)

    result = compare(SOURCE[3:], copied(SOURCE), FOLDED, lost=lost)
    shifted_content = compare(
        SOURCE[3:], copied([*SOURCE[1:], record(10, "k10")]), FOLDED, lost=Lost("source", 0, 3, 10**9)
    )

    assert (result.verdict, result.first_offset, lost.records) == (Verdict.MISSING, 0, 3)
    assert shifted_content.verdict is not Verdict.EQUAL


def test_compaction_inside_a_folded_run_on_either_side_is_compaction():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(10)]
    target = copied(source)
    source_compacted = [r for r in source if r.offset >= 7]
    target_compacted = [r for r in target if r.offset >= 109]

    by_source = compare(source_compacted, target, FOLDED, source_compacted=True)
    by_target = compare(source, target_compacted, FOLDED, target_compacted=True)
    by_both = compare(
        [r for r in source if r.offset in (1, 7, 8, 9)],
        [r for r in target if r.offset in (105, 109, 110, 111)],
        FOLDED,
        source_compacted=True,
        target_compacted=True,
    )

    assert (by_source.verdict, by_source.compacted_source) == (Verdict.EQUAL, 7)
    assert (by_target.verdict, by_target.compacted_target) == (Verdict.EQUAL, 7)
    assert (by_both.verdict, by_both.compacted_source, by_both.compacted_target) == (Verdict.EQUAL, 1, 1)


def test_an_altered_copy_in_a_compacted_folded_run_is_never_equal():
    source = [record(o, f"k{o % 3}", f"v{o}") for o in range(10)]
    target = [r for r in copied(source) if r.offset >= 108]
    altered = [record(108, "k0", "forged") if r.offset == 108 else r for r in target]
    new_key = [record(108, "k9", "v7") if r.offset == 108 else r for r in target]

    for forged in (altered, new_key):
        for source_compacted in (False, True):
            result = compare(source, forged, FOLDED, source_compacted=source_compacted, target_compacted=True)
            assert result.verdict is not Verdict.EQUAL, (forged, source_compacted)


def test_an_absence_in_a_folded_run_no_compaction_explains_is_a_difference():
    source = [record(o, f"k{o}") for o in range(10)]
    target = [r for r in copied(source) if r.offset != 105]

    result = compare(source, target, FOLDED, target_compacted=True)

    assert (result.verdict, result.first_offset) == (Verdict.MISSING, 4)


def test_run_map_finds_a_folded_run_by_its_downstream_stop_and_maps_only_exact_runs():
    mapping = RunMap([OffsetRun(0, 10, 100, 112, 10), OffsetRun(10, 12, 112)])

    assert [mapping.downstream_run(o) is not None for o in (99, 100, 111, 112, 113, 114)] == [
        False,
        True,
        True,
        True,
        True,
        False,
    ]
    assert (mapping.to_target(5), mapping.to_target(11), mapping.to_source(111), mapping.to_source(113)) == (
        None,
        113,
        None,
        11,
    )


# Schema ids: source ids 3 and 4 are mapped to target ids 1003 and 1004 (translate).
ID_MAP = {3: 1003, 4: 1004}
VALUES = SchemaIdMap(ID_MAP, frozenset({Side.VALUE}))
BOTH = SchemaIdMap(ID_MAP, frozenset(Side))


def framed(schema_id: int, body: bytes = b"payload") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + body


def avro(offset: int, value_id: int = 3, key: bytes | None = b"k", headers=(), body: bytes = b"payload") -> Record:
    return Record(offset, key, framed(value_id, body + str(offset).encode()), tuple(headers), 1000)


def translated(records: list[Record], ids=ID_MAP, by: int = 100) -> list[Record]:
    """The copies the copy job writes: each framed value's id mapped (unmapped ids kept), ``by`` offsets on."""

    def mapped(data: bytes | None) -> bytes | None:
        if data is None or data[:1] != b"\x00":
            return data
        schema_id = struct.unpack(">I", data[1:5])[0]
        return framed(ids.get(schema_id, schema_id), data[5:])

    return [Record(r.offset + by, r.key, mapped(r.value), r.headers, r.timestamp) for r in records]


AVRO = [avro(o, 3 if o % 2 else 4) for o in range(10)]


def test_a_translated_copy_compared_through_the_id_map_is_equal_with_equal_digests():
    result = compare(AVRO, translated(AVRO), schema_ids=VALUES)
    as_bytes = compare(AVRO, translated(AVRO))

    assert (result.verdict, result.schema_id, result.schema_id_difference) == (Verdict.EQUAL, 0, "")
    assert result.source_digest == result.target_digest
    assert (as_bytes.verdict, as_bytes.different) == (Verdict.DIFFERENT, 10)


def test_a_copy_holding_another_id_than_the_map_gives_is_a_schema_id_difference_naming_it():
    target = translated(AVRO, {3: 1003, 4: 1009})

    result = compare(AVRO, target, schema_ids=VALUES)

    assert (result.verdict, result.first_offset, result.schema_id, result.different) == (Verdict.SCHEMA_ID, 0, 5, 0)
    assert result.schema_id_difference == "source offset 0, value: source id 4 maps to 1004, the copy holds 1009"
    assert verdict_reason(result) == (
        "the copy of source offset 0 differs from it only in a schema id the id map does not explain "
        "(source offset 0, value: source id 4 maps to 1004, the copy holds 1009)"
    )


def test_an_id_the_map_does_not_give_is_unmapped_whether_the_copy_translated_it_or_not():
    partial = SchemaIdMap({4: 1004}, frozenset({Side.VALUE}))

    translated_copy = compare(AVRO, translated(AVRO), schema_ids=partial)
    passed_copy = compare(AVRO, translated(AVRO, {4: 1004}), schema_ids=partial)

    assert (translated_copy.verdict, translated_copy.first_offset, translated_copy.schema_id) == (
        Verdict.SCHEMA_ID,
        1,
        5,
    )
    assert translated_copy.schema_id_difference == (
        "source offset 1, value: source id 3 is unmapped, the copy holds 1003"
    )
    assert (passed_copy.verdict, passed_copy.schema_id) == (Verdict.SCHEMA_ID, 5)
    assert passed_copy.schema_id_difference == "source offset 1, value: source id 3 is unmapped, the copy holds 3"


def test_a_copy_that_differs_beside_its_schema_id_is_different():
    target = translated(AVRO)
    target[3] = Record(103, b"k", framed(1009, b"other"), (), 1000)
    unframed = translated(AVRO)
    unframed[3] = Record(103, b"k", b"\x05" + AVRO[3].value[1:], (), 1000)

    result = compare(AVRO, target, schema_ids=VALUES)
    not_framed = compare(AVRO, unframed, schema_ids=VALUES)

    assert (result.verdict, result.first_offset, result.different, result.schema_id) == (Verdict.DIFFERENT, 3, 1, 0)
    assert (not_framed.verdict, not_framed.different, not_framed.schema_id) == (Verdict.DIFFERENT, 1, 0)


def test_keys_and_header_ids_are_mapped_and_a_wrong_header_id_is_named_by_its_header():
    # the value's schema is named by its header (its payload is then not framed, whatever its first byte); the key's
    # by its frame
    raw_value = b"\x00\x00\x00\x00\x09 an unframed Avro payload"
    source = [
        Record(o, framed(3, b"key"), raw_value, (("trace", b"t"), ("__value_schema_id", framed(4, b""))), 1000)
        for o in range(3)
    ]
    target = [
        Record(
            100 + o,
            framed(1003, b"key"),
            raw_value,
            (("trace", b"t"), ("__value_schema_id", framed(1004 if o != 2 else 1007, b""))),
            1000,
        )
        for o in range(3)
    ]

    result = compare(source, target, [OffsetRun(0, 3, 100)], schema_ids=BOTH)
    key_unframed = compare(source, target, [OffsetRun(0, 3, 100)], schema_ids=VALUES)

    assert (result.verdict, result.first_offset, result.schema_id) == (Verdict.SCHEMA_ID, 2, 1)
    assert result.schema_id_difference == (
        "source offset 2, header __value_schema_id: source id 4 maps to 1004, the copy holds 1007"
    )
    assert (key_unframed.verdict, key_unframed.different) == (Verdict.DIFFERENT, 3)  # the key is not a framed side


def test_a_guid_header_is_left_as_it_is_and_its_side_read_unframed():
    guid = b"\x01" + bytes(16)
    source = [Record(o, framed(3, b"key"), framed(4), (("__value_schema_id", guid),), 1000) for o in range(2)]
    target = [Record(100 + o, framed(1003, b"key"), framed(4), (("__value_schema_id", guid),), 1000) for o in range(2)]

    assert compare(source, target, [OffsetRun(0, 2, 100)], schema_ids=BOTH).verdict == Verdict.EQUAL


def test_the_first_schema_id_difference_is_named_when_another_difference_comes_first():
    target = translated(AVRO, {3: 1003, 4: 1009})
    del target[0]

    result = compare(AVRO, target, schema_ids=VALUES)

    assert (result.verdict, result.first_offset, result.missing, result.schema_id) == (Verdict.MISSING, 0, 1, 4)
    assert result.schema_id_difference.startswith("source offset 2, value: source id 4 maps to 1004")


def test_a_translated_copy_in_a_folded_run_pairs_and_a_wrong_id_there_is_never_equal():
    target = copied(translated(AVRO, by=0))
    wrong = copied(translated(AVRO, {3: 1003, 4: 1009}, by=0))

    equal = compare(AVRO, target, FOLDED, schema_ids=VALUES)
    different = compare(AVRO, wrong, FOLDED, schema_ids=VALUES)

    assert (equal.verdict, equal.source_digest == equal.target_digest) == (Verdict.EQUAL, True)
    assert different.verdict is not Verdict.EQUAL


def test_compaction_looks_for_translated_keys_on_the_source_and_beyond_the_compared_range():
    source = [Record(o, framed(3, b"k"), framed(4, str(o).encode()), (), 1000) for o in range(3)]
    target = [Record(100 + o, framed(1003, b"k"), framed(1004, str(o).encode()), (), 1000) for o in range(3)]
    runs = [OffsetRun(0, 3, 100)]

    def later(**options):
        return compare(
            [], target, runs, source_compacted=True, source_later_keys=lambda: iter([framed(3, b"k")]), **options
        )

    in_range = compare(source[2:], target, runs, source_compacted=True, schema_ids=BOTH)
    by_target = compare(source, target[2:], runs, target_compacted=True, schema_ids=BOTH)
    beyond, raw = later(schema_ids=BOTH), later()

    assert (in_range.verdict, in_range.compacted_source) == (Verdict.EQUAL, 2)
    assert (by_target.verdict, by_target.compacted_target) == (Verdict.EQUAL, 2)
    assert (beyond.verdict, beyond.compacted_source) == (Verdict.EQUAL, 3)
    assert (raw.verdict, raw.extra) == (Verdict.EXTRA, 3)


def test_a_schema_id_map_pickles_for_spark_executors():
    assert pickle.loads(pickle.dumps(BOTH)) == BOTH


def test_records_a_flows_transforms_drop_are_filtered_and_kept_ones_compared_as_transformed():
    pii = Predicate("isPII", PredicateKind.HAS_HEADER_KEY, header="pii")
    steps = (
        Step("dropPII", StepKind.FILTER, pii),
        Step("tag", StepKind.INSERT_HEADER, header="by", literal=b"airmirror"),
    )
    source = [record(o, f"k{o}", headers=[("pii", b"1")] if o % 3 == 0 else []) for o in range(10)]
    kept = [r for r in source if not r.headers]
    copies = [record(100 + i, r.key.decode(), headers=[("by", b"airmirror")]) for i, r in enumerate(kept)]
    runs = [OffsetRun(1, 3, 100), OffsetRun(4, 6, 102), OffsetRun(7, 9, 104)]
    result = compare(source, copies, runs, transforms=RecordTransforms(steps))
    assert (result.verdict, result.filtered, result.source_records, result.target_records) == (Verdict.EQUAL, 4, 6, 6)
    assert result.source_digest == result.target_digest
    untagged = [record(r.offset, r.key.decode()) for r in copies]
    assert compare(source, untagged, runs, transforms=RecordTransforms(steps)).verdict is Verdict.DIFFERENT
    assert compare(source, copies, runs).verdict is Verdict.MISSING, "without the chain the drops are missing"


def test_a_field_transform_is_compared_as_the_copy_of_its_remote_partition_writes_it():
    add = Step(
        "add", StepKind.INSERT_FIELD, fields=FieldEdit(Part.VALUE, inserted=(("origin", "topic"), ("p", "partition")))
    )
    source = [record(o, f"k{o}", value=f'{{"n":{o}}}') for o in range(3)]
    copies = [record(100 + o, f"k{o}", value=f'{{"n":{o},"origin":"a.t","p":2}}') for o in range(3)]
    assert compare(source, copies, [OffsetRun(0, 3, 100)], transforms=RecordTransforms((add,), "a.t", 2)).verdict is (
        Verdict.EQUAL
    )
