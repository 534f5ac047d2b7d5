"""Copying subjects between two fake registries: names, order, references, compatibility, dry run, keep, translate."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest

from airmirror.config.schema_registries import SchemaIds
from airmirror.errors import ReplicationFailure, SchemaRefused
from airmirror.mm2.policy import DefaultReplicationPolicy, PatternList, RegexFilter
from airmirror.schemas.framing import Side
from airmirror.schemas.registry_client import RegistryClient
from airmirror.schemas.subject_copy import SubjectCopier, SubjectNames, TopicNaming, topic_of
from tests.unit.schemas.fake_registry import FakeRegistry

NAMES = SubjectNames({"orders": "a.orders", "common": "a.common"})
V1 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}'
V2 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"n","type":"int","default":0}]}'


@pytest.fixture(autouse=True)
def clients_closed() -> Iterator[None]:
    """Every client a test's copiers opened is closed after it."""
    yield
    while OPENED:
        OPENED.pop().close()


OPENED: list[RegistryClient] = []


def copier(source: FakeRegistry, target: FakeRegistry, mode: SchemaIds, *, dry_run: bool = False) -> SubjectCopier:
    """A copier from cluster ``a``'s registry ``source`` to cluster ``b``'s ``target``."""
    clients = RegistryClient(source.access("a")), RegistryClient(target.access("b"))
    OPENED.extend(clients)
    return SubjectCopier(*clients, mode, NAMES, dry_run=dry_run)


def registered(registry: FakeRegistry) -> list[str]:
    """The subjects registered into, in the order of the requests (keep's probe left out)."""
    return [
        r.path.split("/")[2]
        for r in registry.writes()
        if r.method == "POST" and r.path.endswith("/versions") and not r.path.startswith(PROBE)
    ]


PROBE = "/subjects/airmirror-keep-probe-"


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("orders-value", ("orders", Side.VALUE)),
        ("orders-key", ("orders", Side.KEY)),
        ("my-topic-value", ("my-topic", Side.VALUE)),
        ("-value", None),
        ("-key", None),
        ("com.example.Order", None),
        ("orders-values", None),
    ],
)
def test_topic_of_names_topic_and_side_of_topic_name_strategy_subjects(
    subject: str, expected: tuple[str, Side] | None
) -> None:
    assert topic_of(subject) == expected


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("orders-value", "a.orders-value"),
        ("orders-key", "a.orders-key"),
        ("common-value", "a.common-value"),
        ("other-value", "other-value"),
        ("com.example.Order", "com.example.Order"),
        ("orders", "orders"),
    ],
)
def test_subjects_of_replicated_topics_are_named_after_the_remote_topic_others_keep_their_names(
    subject: str, expected: str
) -> None:
    assert NAMES.target(subject) == expected


def test_off_has_nothing_to_copy(source: FakeRegistry, target: FakeRegistry) -> None:
    with pytest.raises(ValueError, match="off"):
        copier(source, target, SchemaIds.OFF)


def test_translate_copies_every_version_oldest_first_under_the_remote_subject(
    source: FakeRegistry, target: FakeRegistry
) -> None:
    first, second = source.add("orders-value", V1), source.add("orders-value", V2)
    copy = copier(source, target, SchemaIds.TRANSLATE)
    report = copy.copy_subject("orders-value")
    assert (report.subject, report.target_subject, report.registered) == ("orders-value", "a.orders-value", 2)
    assert [(v.source_version, v.target_version) for v in report.versions] == [(1, 1), (2, 2)]
    assert [target.version("a.orders-value", n)["schema"] for n in (1, 2)] == [V1, V2]
    new_first, new_second = (target.version("a.orders-value", n)["id"] for n in (1, 2))
    assert copy.ids == {first: new_first, second: new_second}
    assert {new_first, new_second}.isdisjoint({first, second}), "the target assigns its own ids"
    assert "orders-value" not in target.subjects


def test_copying_again_registers_nothing(source: FakeRegistry, target: FakeRegistry) -> None:
    source.add("orders-value", V1)
    source.add("orders-value", V2)
    first = copier(source, target, SchemaIds.TRANSLATE)
    first.copy_subject("orders-value")
    writes = len(target.writes())
    again = copier(source, target, SchemaIds.TRANSLATE)
    report = again.copy_subject("orders-value")
    assert report.registered == 0
    assert again.ids == first.ids
    assert len(target.writes()) == writes


def test_references_are_copied_first_and_renamed(source: FakeRegistry, target: FakeRegistry) -> None:
    source.add("shared.Address", "message Old {}", "PROTOBUF")
    source.add("shared.Address", "message Address {}", "PROTOBUF")
    source.add("common-value", "message Common {}", "PROTOBUF")
    source.add(
        "orders-value",
        'import "address.proto"; import "common.proto"; message Order {}',
        "PROTOBUF",
        (("address.proto", "shared.Address", 2), ("common.proto", "common-value", 1)),
    )
    copy = copier(source, target, SchemaIds.TRANSLATE)
    report = copy.copy_subject("orders-value")
    # A referenced version comes with the versions before it (subject_copy rule 2): the target's versions are the
    # source's.
    assert registered(target) == ["shared.Address", "shared.Address", "a.common-value", "a.orders-value"]
    assert report.registered == 1
    assert target.version("a.orders-value", 1)["references"] == [
        {"name": "address.proto", "subject": "shared.Address", "version": 2},
        {"name": "common.proto", "subject": "a.common-value", "version": 1},
    ]
    assert target.version("shared.Address", 2)["schema"] == "message Address {}"
    assert len(copy.ids) == 4


def test_a_subjects_own_compatibility_is_set_on_the_target(source: FakeRegistry, target: FakeRegistry) -> None:
    source.add("orders-value", V1)
    source.levels["orders-value"] = "FULL"
    report = copier(source, target, SchemaIds.TRANSLATE).copy_subject("orders-value")
    assert report.compatibility == "FULL"
    assert target.levels == {"a.orders-value": "FULL"}
    config_write, registration = (r.path for r in target.writes())
    assert (config_write, registration) == ("/config/a.orders-value", "/subjects/a.orders-value/versions")


@pytest.mark.parametrize("level", [None, "NONE"], ids=["none of its own", "the global level"])
def test_a_subject_without_a_level_of_its_own_gets_the_source_registrys_global_level_on_the_target(
    source: FakeRegistry, target: FakeRegistry, level: str | None
) -> None:
    """Source at NONE (Apicurio's default), target at BACKWARD: the target subject is set to NONE before its first
    version, so an evolution the source accepted is accepted on the target too."""
    source.global_level, target.global_level = "NONE", "BACKWARD"
    source.add("orders-value", V1)
    if level is not None:
        source.levels["orders-value"] = level
    report = copier(source, target, SchemaIds.TRANSLATE).copy_subject("orders-value")
    assert report.compatibility == "NONE"
    assert target.levels == {"a.orders-value": "NONE"}
    assert [r.path for r in target.writes()][:2] == ["/config/a.orders-value", "/subjects/a.orders-value/versions"]


def test_the_target_keeps_its_level_when_it_is_already_in_force(source: FakeRegistry, target: FakeRegistry) -> None:
    source.add("orders-value", V1)
    report = copier(source, target, SchemaIds.TRANSLATE).copy_subject("orders-value")
    assert report.compatibility == "BACKWARD"  # both registries' global level
    assert target.levels == {}


def test_a_target_subject_the_flow_does_not_own_is_never_changed(source: FakeRegistry, target: FakeRegistry) -> None:
    """A subject that keeps its name (RecordNameStrategy) and already holds versions on the target belongs to the
    target's own producers: its level stays."""
    source.global_level = "NONE"
    source.add("shared.Address", V1)
    target.add("shared.Address", V1)
    copier(source, target, SchemaIds.TRANSLATE).copy_subject("shared.Address")
    assert target.levels == {}


def test_a_target_already_at_the_level_is_left_alone(source: FakeRegistry, target: FakeRegistry) -> None:
    source.add("orders-value", V1)
    source.levels["orders-value"] = "NONE"
    target.levels["a.orders-value"] = "NONE"
    copier(source, target, SchemaIds.TRANSLATE).copy_subject("orders-value")
    assert not any(r.path.startswith("/config/") for r in target.writes())


@pytest.mark.parametrize("mode", [SchemaIds.TRANSLATE, SchemaIds.KEEP])
def test_a_dry_run_writes_nothing_and_reports_what_it_would_register(
    source: FakeRegistry, target: FakeRegistry, mode: SchemaIds
) -> None:
    source.add("common-value", "message Common {}", "PROTOBUF")
    source.add("orders-value", "message Order {}", "PROTOBUF", (("common.proto", "common-value", 1),))
    source.add("orders-value", "message Order { int32 n = 1; }", "PROTOBUF", (("common.proto", "common-value", 1),))
    source.levels["orders-value"] = "FULL"
    copy = copier(source, target, mode, dry_run=True)
    report = copy.copy_subject("orders-value")
    assert target.writes() == []
    assert target.subjects == {} and target.levels == {} and target.modes == {}
    assert report.compatibility == "FULL"
    assert [(v.target_subject, v.registered, v.target_id) for v in report.versions] == [
        ("a.orders-value", True, None),
        ("a.orders-value", True, None),
    ]
    assert copy.ids == {}


def test_keep_imports_the_source_ids_in_import_mode(source: FakeRegistry, target: FakeRegistry) -> None:
    source.add("orders-value", V1, schema_id=7)
    source.add("orders-value", V2, schema_id=9)
    copy = copier(source, target, SchemaIds.KEEP)
    report = copy.copy_subject("orders-value")
    assert target.modes == {"a.orders-value": "IMPORT"}
    assert target.subjects == {"a.orders-value": [7, 9]}, "the probe is gone"
    assert copy.ids == {7: 7, 9: 9}
    assert [(v.target_version, v.target_id, v.registered) for v in report.versions] == [(1, 7, True), (2, 9, True)]
    imported = [r.body.get("id") for r in target.writes() if r.method == "POST" and r.path.endswith("/versions")]
    probe_id, *ids = imported
    assert ids == [7, 9] and probe_id not in (7, 9)
    assert target.writes()[0].path.startswith("/mode/airmirror-keep-probe-"), "the probe comes before any write"


def test_keep_takes_an_id_the_target_holds_with_the_same_schema_as_copied(
    source: FakeRegistry, target: FakeRegistry
) -> None:
    source.add("orders-value", V1, schema_id=7)
    target.add("a.orders-value", V1, schema_id=7)
    report = copier(source, target, SchemaIds.KEEP).copy_subject("orders-value")
    assert [(v.target_id, v.registered) for v in report.versions] == [(7, False)]
    assert registered(target) == []


def test_keep_refuses_an_id_taken_on_the_target_by_another_schema_naming_both(
    source: FakeRegistry, target: FakeRegistry
) -> None:
    source.add("orders-value", V1, schema_id=7)
    target.add("payments-value", '"string"', schema_id=7)
    with pytest.raises(ReplicationFailure) as failure:
        copier(source, target, SchemaIds.KEEP).copy_subject("orders-value")
    message = str(failure.value)
    assert "schema id 7" in message and "orders-value v1" in message and "payments-value v1" in message
    assert "'a'" in message and "'b'" in message
    assert registered(target) == []


def test_keep_refuses_a_target_that_ignores_import_ids_before_changing_any_subject(source: FakeRegistry) -> None:
    """Apicurio 3.3's Confluent API registers IMPORT mode's schemas under ids of its own: the probe finds it, and the
    target is left as it was found (the probe subject deleted for good, its mode too)."""
    source.add("orders-value", V1, schema_id=7)
    with FakeRegistry(first_id=500, ignores_import_ids=True) as target:
        with pytest.raises(ReplicationFailure) as failure:
            copier(source, target, SchemaIds.KEEP).copy_subject("orders-value")
        assert (target.subjects, target.modes, target.levels) == ({}, {}, {})
        assert all(r.path.startswith(("/mode/airmirror-keep-probe-", PROBE)) for r in target.writes())
    message = str(failure.value)
    assert "does not keep the ids of IMPORT mode" in message and "'b'" in message and "translate" in message


def test_copy_id_copies_through_the_hinted_subject_and_remembers(source: FakeRegistry, target: FakeRegistry) -> None:
    shared = source.add("orders-value", V1)
    assert source.add("other-value", V1) == shared, "one schema, one id, under two subjects"
    copy = copier(source, target, SchemaIds.TRANSLATE)
    target_id = copy.copy_id(shared, "other-value")
    assert target_id is not None and target_id != shared
    assert target.subjects == {"other-value": [target_id]}
    requests = len(source.requests)
    assert copy.copy_id(shared, "orders-value") == target_id
    assert len(source.requests) == requests


def test_copy_id_of_an_unknown_id_is_none(source: FakeRegistry, target: FakeRegistry) -> None:
    assert copier(source, target, SchemaIds.TRANSLATE).copy_id(404) is None
    assert target.writes() == []


def test_copy_id_of_a_schema_whose_subject_is_gone_registers_it_by_the_record_topics_subject(
    source: FakeRegistry, target: FakeRegistry
) -> None:
    orphan = source.add("orders-value", V1)
    del source.subjects["orders-value"]  # hard-deleted subject, the schema still served by id (no holder listed)
    copy = copier(source, target, SchemaIds.TRANSLATE)

    target_id = copy.copy_id(orphan, "orders-value")

    assert target_id is not None
    assert target.subjects == {f"a.orders-value.airmirror-deleted-{orphan}": [target_id]}
    assert copy.ids == {orphan: target_id}
    with pytest.raises(ReplicationFailure, match="belongs to no subject"):
        copier(source, target, SchemaIds.TRANSLATE).copy_id(orphan)


def test_a_version_met_first_in_a_record_comes_after_the_versions_before_it(
    source: FakeRegistry, target: FakeRegistry
) -> None:
    """v2 and v3 registered after the sync, a v3 record met first: the target gets v2 before v3, whichever of two
    copiers (two tasks) meets what first."""
    source.add("orders-value", V1)
    v2 = source.add("orders-value", V2)
    v3 = source.add("orders-value", '{"type":"record","name":"Order","fields":[]}')
    first, second = copier(source, target, SchemaIds.TRANSLATE), copier(source, target, SchemaIds.TRANSLATE)
    third_id = first.copy_id(v3, "orders-value")
    second_id = second.copy_id(v2, "orders-value")
    assert [target.version("a.orders-value", n)["id"] for n in (1, 2, 3)][1:] == [second_id, third_id]
    assert [target.version("a.orders-value", n)["schema"] for n in (1, 2, 3)] == [
        source.version("orders-value", n)["schema"] for n in (1, 2, 3)
    ]


def test_a_soft_deleted_version_is_registered_for_its_id_without_becoming_the_targets_latest(
    source: FakeRegistry, target: FakeRegistry
) -> None:
    """It goes to a subject of its own, soft-deleted: no compatibility rule can refuse it, no latest changes."""
    old = source.add("orders-value", V1)
    source.add("orders-value", V2)
    source.deleted.add(("orders-value", 1))
    copy = copier(source, target, SchemaIds.TRANSLATE)
    copy.copy_subject("orders-value")  # the sync: v2 only

    target_id = copy.copy_id(old, "payments-value")  # the hint loses to the subject that held the id

    assert target_id is not None and target.schemas[target_id]["schema"] == V1
    own = f"a.orders-value.airmirror-deleted-{old}"
    assert target.subjects == {"a.orders-value": [target.subjects["a.orders-value"][0]], own: [target_id]}
    assert target.deleted == {(own, 1)}, "the target subject's latest is untouched"
    writes = len(target.writes())
    assert copier(source, target, SchemaIds.TRANSLATE).copy_id(old, "orders-value") == target_id
    assert len(target.writes()) == writes, "found soft-deleted on the target, not registered again"


def test_a_refused_version_names_subject_version_both_registries_and_the_settings(
    source: FakeRegistry, target: FakeRegistry
) -> None:
    source.add("orders-value", V1)
    target.incompatible["a.orders-value"] = "Incompatible artifact: a.orders-value"
    with pytest.raises(SchemaRefused) as refused:
        copier(source, target, SchemaIds.TRANSLATE).copy_subject("orders-value")
    message = str(refused.value)
    assert "orders-value v1" in message and "as a.orders-value" in message
    assert "cluster 'a'" in message and "cluster 'b'" in message
    assert "airmirror.schema.unknown = pass" in message and "compatibility level" in message


def test_a_subject_of_a_replicated_topic_outside_the_batch_is_named_by_the_flows_rule_and_others_keep_theirs() -> None:
    """A schema met mid-run may reference a subject of a topic the batch does not copy: its target subject is the one
    the next sync would use (the flow's policy), never the source's name, which may belong to the target."""
    topics = RegexFilter(PatternList.parse("orders, customers", key="topics"), PatternList.parse("", key="x"))
    naming = TopicNaming(DefaultReplicationPolicy(), topics, "a", "b", heartbeats_replication=True)
    names = pickle.loads(pickle.dumps(SubjectNames({"orders": "a.orders"}, naming)))

    assert names.target("orders-value") == "a.orders-value"
    assert names.target("customers-value") == "a.customers-value"  # replicated, not in this batch
    assert names.target("payments-value") == "payments-value"  # not replicated: keeps its name
    assert names.target("com.example.Address") == "com.example.Address"
