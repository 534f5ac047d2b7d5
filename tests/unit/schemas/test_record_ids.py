"""The copy job's per-record id rewrite: translate and keep, ids mapped in the run, ids the source does not know."""

from __future__ import annotations

import pickle
import struct
import uuid
from collections.abc import Iterator, Mapping

import pytest

from airmirror.config.schema_registries import SchemaIds
from airmirror.errors import SchemaRefused, UnknownSchemaId
from airmirror.schemas import record_ids
from airmirror.schemas.framing import Side, framed_id, with_guid
from airmirror.schemas.record_ids import Headers, IdTranslator, RecordIds
from airmirror.schemas.subject_copy import SubjectNames
from tests.unit.schemas.fake_registry import FakeRegistry

BOTH = frozenset(Side)
GUID_HEADER = bytes([1]) + bytes(range(16)) + b"\x00"
"""A schema-id header in the GUID form, then a Protobuf message index."""
V1 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}'


def frame(schema_id: int, rest: bytes = b"payload") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + rest


@pytest.fixture
def translators() -> Iterator[list[IdTranslator]]:
    """The translators a test made, closed after it."""
    made: list[IdTranslator] = []
    yield made
    for translator in made:
        translator.close()


def translator(
    made: list[IdTranslator],
    source: FakeRegistry,
    target: FakeRegistry,
    *,
    mode: SchemaIds = SchemaIds.TRANSLATE,
    unknown: str = "fail",
    ids: Mapping[int, int] | None = None,
    framed: frozenset[Side] = BOTH,
) -> IdTranslator:
    record_ids = RecordIds(
        mode=mode,
        unknown=unknown,
        ids={} if ids is None else ids,
        framed={"orders": framed},
        names=SubjectNames({"orders": "a.orders"}),
        source=source.access("a"),
        target=target.access("b"),
    )
    made.append(IdTranslator(record_ids))
    return made[-1]


def test_translate_rewrites_key_value_and_header_ids_and_nothing_else(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    ids = translator(translators, source, target, ids={1: 101, 2: 102, 3: 103})
    protobuf = frame(2, b"\x04\x02\x06\x00" + b"\x0a\x03abc")
    headers = [("trace", frame(1)), ("empty", None), ("text", "plain")]
    key, value, rewritten, passed = ids.rewriter("orders", 0)(5, frame(1, b"k"), protobuf, headers)
    assert key == frame(101, b"k")
    assert value == frame(102, b"\x04\x02\x06\x00" + b"\x0a\x03abc")
    assert rewritten == headers
    assert passed is False
    # Ids in headers: the payloads they name are not framed (confluent-kafka reads the header first), even when
    # they start with a zero byte.
    raw = frame(1, b"raw")
    headers = [("trace", frame(1)), ("__value_schema_id", frame(3, b"\x00")), ("__key_schema_id", frame(2, b""))]
    key, value, rewritten, passed = ids.rewriter("orders", 0)(6, raw, raw, headers)
    assert (key, value) == (raw, raw)
    assert rewritten == [
        ("trace", frame(1)),
        ("__value_schema_id", frame(103, b"\x00")),
        ("__key_schema_id", frame(102, b"")),
    ]
    assert passed is False
    assert ids.new_ids == {}
    assert source.requests == [] and target.requests == [], "a mapped id needs no registry"


@pytest.mark.parametrize("payload", [None, b"", b"\x00\x00", b"\x01\x00\x00\x00\x01x", b"plain"])
def test_an_unframed_payload_of_a_framed_side_is_copied_as_it_is(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator], payload: bytes | None
) -> None:
    ids = translator(translators, source, target, ids={1: 101})
    assert ids.rewriter("orders", 0)(0, payload, payload, None) == (payload, payload, None, False)
    assert source.requests == []


def test_a_side_that_is_not_framed_is_not_read(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    ids = translator(translators, source, target, ids={1: 101}, framed=frozenset({Side.VALUE}))
    key, value, _, _ = ids.rewriter("orders", 0)(0, frame(1), frame(1), None)
    assert (key, value) == (frame(1), frame(101))


def test_a_topic_without_framed_sides_is_copied_untouched(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    ids = translator(translators, source, target, ids={1: 101})
    assert ids.framed("payments") == frozenset()
    assert ids.rewriter("payments", 0)(0, frame(1), frame(1), []) == (frame(1), frame(1), [], False)


def test_keep_leaves_the_bytes_as_they_are(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    ids = translator(translators, source, target, mode=SchemaIds.KEEP, ids={1: 1, 2: 2})
    headers: Headers = [("__value_schema_id", frame(2, b""))]
    assert ids.rewriter("orders", 0)(0, frame(1), frame(2), headers) == (frame(1), frame(2), headers, False)


def test_keep_imports_an_unmapped_id_and_leaves_the_bytes(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    schema_id = source.add("orders-value", V1, schema_id=42)
    ids = translator(translators, source, target, mode=SchemaIds.KEEP, framed=frozenset({Side.VALUE}))
    assert ids.rewriter("orders", 0)(0, None, frame(schema_id), None) == (None, frame(schema_id), None, False)
    assert ids.new_ids == {42: 42}
    assert target.subjects == {"a.orders-value": [42]}


def test_an_id_missing_from_the_map_is_copied_in_the_run_once(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    source.add("payments-value", '"string"')
    late = source.add("orders-value", V1)
    ids = translator(translators, source, target, ids={})
    _, value, _, passed = ids.rewriter("orders", 1)(9, None, frame(late), None)
    target_id = target.version("a.orders-value", 1)["id"]
    assert target_id != late
    assert (framed_id(value), passed) == (target_id, False)
    assert ids.new_ids == {late: target_id} and ids.ids[late] == target_id
    asked = len(source.requests)
    _, again, headers, _ = ids.rewriter("orders", 1)(10, None, b"raw", [("__value_schema_id", frame(late, b""))])
    assert again == b"raw" and headers == [("__value_schema_id", frame(target_id, b""))]
    assert len(source.requests) == asked, "a mapped id is not asked for again"


def test_an_id_unknown_to_the_source_fails_naming_topic_partition_offset_side_and_id(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    ids = translator(translators, source, target, ids={1: 101})
    with pytest.raises(UnknownSchemaId) as unknown:
        ids.rewriter("orders", 3)(1234, frame(1), frame(77), None)
    message = str(unknown.value)
    assert "orders-3@1234" in message
    assert "the value names schema id 77" in message
    assert "'a'" in message and "airmirror.schema.unknown" in message
    assert target.writes() == []


def test_an_unknown_header_id_fails_naming_its_side(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    ids = translator(translators, source, target, ids={1: 101})
    with pytest.raises(UnknownSchemaId, match="orders-0@8: the header __key_schema_id names schema id 66"):
        ids.rewriter("orders", 0)(8, b"k", frame(1), [("__key_schema_id", frame(66, b""))])


def test_pass_copies_a_record_with_an_unknown_id_unchanged_and_says_so(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    ids = translator(translators, source, target, unknown="pass", ids={1: 101})
    assert ids.rewriter("orders", 0)(0, frame(1), frame(77), None) == (frame(101), frame(77), None, True)
    asked = len(source.requests)
    assert ids.rewriter("orders", 0)(1, frame(77), frame(1), None) == (frame(77), frame(101), None, True)
    assert len(source.requests) == asked, "an unknown id is asked for once"
    assert ids.rewriter("orders", 0)(2, frame(1), frame(1), None)[3] is False
    assert ids.new_ids == {} and set(ids.unknown) == {77}


def test_an_unknown_id_is_asked_for_again_after_its_time_and_then_translated(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema registered after a record naming its id was passed: once the unknown id's time is up, the next such
    record asks again and is translated."""
    ids = translator(translators, source, target, unknown="pass", ids={})
    late = source.first_id + 50
    assert ids.rewriter("orders", 0)(0, None, frame(late), None)[3] is True
    source.add("orders-value", '"string"', schema_id=late)
    assert ids.rewriter("orders", 0)(1, None, frame(late), None)[3] is True, "still within its time"
    monkeypatch.setattr(record_ids, "UNKNOWN_ID_TTL_S", 0.0)

    _, value, _, passed = ids.rewriter("orders", 0)(2, None, frame(late), None)

    assert passed is False and value == frame(ids.new_ids[late]) and late not in ids.unknown


def test_what_a_copy_task_gets_pickles_and_shows_no_credentials(source: FakeRegistry) -> None:
    access = source.access("a", url=source.url.replace("http://", "http://u:url-pw@"))
    access.file_settings["basic.auth.user.info"] = "u:user-info-pw"
    record_ids = RecordIds(SchemaIds.TRANSLATE, "fail", {1: 2}, {"orders": BOTH}, SubjectNames({}), access, access)
    assert pickle.loads(pickle.dumps(record_ids)) == record_ids
    assert "pw" not in repr(record_ids)


@pytest.mark.parametrize("framed", [BOTH, frozenset({Side.VALUE}), frozenset({Side.KEY})])
def test_the_short_way_for_records_without_schema_id_headers_equals_the_general_one(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator], framed: frozenset[Side]
) -> None:
    ids = translator(translators, source, target, ids={1: 101, 2: 2, 3: 7}, framed=framed)
    payloads = [None, b"", b"\x00", b"\x00\x00\x00\x01", b"plain", frame(1), frame(2), frame(3, b"")]
    payloads.append(frame(3, b"\x02\x04"))
    headers: list[Headers] = [None, [], [("trace", b"t")], [("trace", None)]]
    for key in payloads:
        for value in payloads:
            for listed in headers:
                short = ids.rewriter("orders", 0)(0, key, value, listed)
                general = ids._rewrite_slots("orders", 0, 0, key, value, listed, framed)
                assert short == general, (key, value, listed)


def guid_header(registry: FakeRegistry, schema_id: int) -> bytes:
    return with_guid(GUID_HEADER, registry.guid(schema_id))


def test_a_guid_header_is_translated_to_the_targets_guid_of_the_copied_schema(
    translators: list[IdTranslator],
) -> None:
    with FakeRegistry(first_id=1, guids=True) as source, FakeRegistry(first_id=100, guids=True) as target:
        schema_id = source.add("orders-value", V1)
        ids = translator(translators, source, target, ids={})
        headers = [("__value_schema_id", guid_header(source, schema_id))]
        key, value, rewritten, passed = ids.rewriter("orders", 0)(0, b"k", b"raw", headers)
        target_id = target.version("a.orders-value", 1)["id"]
        assert (key, value, passed) == (b"k", b"raw", False)
        assert rewritten == [("__value_schema_id", guid_header(target, target_id))]
        assert ids.new_ids == {schema_id: target_id}


@pytest.mark.parametrize(("source_guids", "target_guids"), [(False, False), (True, False)])
def test_a_guid_header_a_registry_cannot_name_is_an_unknown_id(
    translators: list[IdTranslator], source_guids: bool, target_guids: bool
) -> None:
    """Apicurio 3.3 has no GUIDs: the record fails under ``fail`` and passes, counted, under ``pass``, never written
    naming a GUID the target registry cannot serve."""
    with (
        FakeRegistry(first_id=1, guids=source_guids) as source,
        FakeRegistry(first_id=100, guids=target_guids) as target,
    ):
        schema_id = source.add("orders-value", V1)
        header = with_guid(GUID_HEADER, str(uuid.UUID(int=schema_id))) if not source_guids else None
        headers = [("__value_schema_id", header or guid_header(source, schema_id))]
        failing = translator(translators, source, target, ids={})
        with pytest.raises(UnknownSchemaId) as unknown:
            failing.rewriter("orders", 2)(7, b"k", b"raw", headers)
        message = str(unknown.value)
        assert "orders-2@7: the header __value_schema_id names schema GUID" in message
        assert ("'a'" if not source_guids else "'b'") in message and "airmirror.schema.unknown = pass" in message
        passing = translator(translators, source, target, unknown="pass", ids={})
        assert passing.rewriter("orders", 2)(7, b"k", b"raw", headers) == (b"k", b"raw", headers, True)


def test_a_version_the_target_refuses_fails_naming_the_record_or_passes_counted(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    schema_id = source.add("orders-value", V1)
    failing = translator(translators, source, target, ids={})
    target.incompatible["a.orders-value"] = "Incompatible artifact"
    with pytest.raises(SchemaRefused) as refused:
        failing.rewriter("orders", 1)(5, None, frame(schema_id), None)
    message = str(refused.value)
    assert "orders-1@5: the value names schema id" in message and "orders-value v1" in message
    assert "a.orders-value" in message and "'a'" in message and "'b'" in message
    assert "airmirror.schema.unknown = pass" in message and "Incompatible artifact" in message
    passing = translator(translators, source, target, unknown="pass", ids={})
    assert passing.rewriter("orders", 1)(5, None, frame(schema_id), None) == (None, frame(schema_id), None, True)


def test_a_topic_that_gets_its_first_subject_is_framed_once_the_list_is_old(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = translator(translators, source, target, ids={}, framed=frozenset())
    assert ids.framed("orders") == frozenset() and source.requests == [], "a list just read is not read again"
    source.add("orders-value", V1)
    monkeypatch.setattr(record_ids, "UNKNOWN_ID_TTL_S", 0.0)
    assert ids.framed("orders") == frozenset({Side.VALUE})
    source.fail_next(503, times=1000)
    monkeypatch.setattr(record_ids, "REFRESH_WAIT_S", 0.1)
    assert ids.framed("orders") == frozenset({Side.VALUE}), "a registry down leaves the list held"


def test_a_side_a_transform_settled_is_left_as_it_is_both_ways(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator]
) -> None:
    rewrite = translator(translators, source, target, ids={1: 101}).rewriter("orders", 0)
    value_settled = frozenset({Side.VALUE})
    assert rewrite(0, frame(1), frame(701), None, value_settled) == (frame(101), frame(701), None, False)
    headers = [("h", b"x")]  # a header list takes the general way
    assert rewrite(0, frame(1), frame(701), headers, value_settled) == (frame(101), frame(701), headers, False)
    assert rewrite(0, frame(1), frame(1), None, frozenset()) == (frame(101), frame(101), None, False)


def test_a_derived_side_is_never_framed_even_once_its_subject_is_listed_again(
    source: FakeRegistry, target: FakeRegistry, translators: list[IdTranslator], monkeypatch: pytest.MonkeyPatch
) -> None:
    record_ids_ = RecordIds(
        mode=SchemaIds.TRANSLATE,
        unknown="fail",
        ids={},
        framed={"orders": frozenset({Side.KEY})},
        names=SubjectNames({"orders": "a.orders"}),
        source=source.access("a"),
        target=target.access("b"),
        derived={"orders": frozenset({Side.VALUE})},
    )
    translators.append(IdTranslator(record_ids_))
    source.add("orders-value", V1)
    source.add("orders-key", V1.replace("Order", "OrderKey"))
    monkeypatch.setattr(record_ids, "UNKNOWN_ID_TTL_S", 0.0)
    assert translators[-1].framed("orders") == frozenset({Side.KEY})
