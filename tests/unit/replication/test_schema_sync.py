"""The schema step (:mod:`airmirror.replication.schema_sync`) against in-process fakes of Confluent's REST API and a
real SQLite metadata DB: what a run's sync copies, stores, and leaves alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airmirror.config import FlowConfig, load_config
from airmirror.kafka.topics import TopicMapping
from airmirror.replication.schema_sync import record_ids, sync_schemas
from airmirror.schemas.framing import Side
from airmirror.store import MetadataStore
from tests.unit.schemas.fake_registry import FakeRegistry

V1 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}'
V2 = '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"n","type":"int","default":0}]}'
MAPPINGS = [TopicMapping("orders", "a.orders", 1), TopicMapping("plain", "a.plain", 1)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}")
    yield opened
    opened.dispose()


def flow_of(tmp_path: Path, source: FakeRegistry, target: FakeRegistry, extra: str = "") -> FlowConfig:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
        f"a.schema.registry.url = {source.url}\nb.schema.registry.url = {target.url}\n{extra}"
    )
    return load_config(config, env={}).flow("a->b")


def test_a_run_copies_subjects_of_replicated_topics_stores_the_map_and_then_leaves_them_alone(
    tmp_path: Path, source: FakeRegistry, target: FakeRegistry, store: MetadataStore
) -> None:
    flow = flow_of(tmp_path, source, target)
    v1 = source.add("orders-value", V1)
    source.add("unreplicated-value", V1 + " ")

    first = sync_schemas(flow, store, MAPPINGS)

    assert first is not None and [s.target_subject for s in first.subjects] == ["a.orders-value"]
    assert store.schema_ids(flow.name) == {v1: target.subjects["a.orders-value"][0]}
    writes = len(target.writes())
    again = sync_schemas(flow, store, MAPPINGS)
    assert again is not None and (again.subjects, again.unchanged) == ([], 1)
    assert len(target.writes()) == writes, "nothing new: nothing registered"

    v2 = source.add("orders-value", V2)
    third = sync_schemas(flow, store, MAPPINGS)
    assert third is not None and [len(s.versions) for s in third.subjects] == [2]
    assert set(store.schema_ids(flow.name)) == {v1, v2}
    assert [s.versions for s in store.schema_subjects(flow.name)] == [2]


def test_the_verb_copies_every_subject_again_and_a_dry_run_stores_nothing(
    tmp_path: Path, source: FakeRegistry, target: FakeRegistry, store: MetadataStore
) -> None:
    flow = flow_of(tmp_path, source, target)
    source.add("orders-value", V1)
    dry = sync_schemas(flow, None, MAPPINGS, dry_run=True)
    assert dry is not None and dry.registered == 1 and target.writes() == []
    assert store.schema_ids(flow.name) == {}
    sync_schemas(flow, store, MAPPINGS)
    full = sync_schemas(flow, store, MAPPINGS, full=True)
    assert full is not None and (len(full.subjects), full.unchanged, full.registered) == (1, 0, 0)


def test_copy_tasks_learn_the_framed_sides_of_their_topics_and_the_stored_map(
    tmp_path: Path, source: FakeRegistry, target: FakeRegistry, store: MetadataStore
) -> None:
    flow = flow_of(tmp_path, source, target, "airmirror.schema.topics = plain\nairmirror.schema.unknown = pass\n")
    source.add("orders-value", V1)
    store.record_schema_ids(flow.name, {1: 101})

    found = record_ids(flow, store, {"orders": "a.orders", "plain": "a.plain", "other": "a.other"})

    assert found is not None
    assert found.framed == {"orders": frozenset({Side.VALUE}), "plain": frozenset(Side)}
    assert (found.ids, found.unknown, found.names.target("orders-value")) == ({1: 101}, "pass", "a.orders-value")


def test_a_side_every_record_of_which_gets_a_derived_schema_is_neither_synced_nor_framed(
    tmp_path: Path, source: FakeRegistry, target: FakeRegistry, store: MetadataStore
) -> None:
    chain = (
        "a->b.transforms = cut, mask\n"
        "a->b.transforms.cut.type = org.apache.kafka.connect.transforms.ReplaceField$Value\n"
        "a->b.transforms.cut.exclude = n\n"
        "a->b.transforms.cut.predicate = isOrders\n"
        "a->b.transforms.mask.type = org.apache.kafka.connect.transforms.MaskField$Key\n"
        "a->b.transforms.mask.fields = id\n"
        "a->b.predicates = isOrders\n"
        "a->b.predicates.isOrders.type = org.apache.kafka.connect.transforms.predicates.TopicNameMatches\n"
        "a->b.predicates.isOrders.pattern = a\\.orders\n"
    )
    flow = flow_of(tmp_path, source, target, chain)
    for subject in ("orders-value", "orders-key", "plain-value"):
        source.add(subject, V1)

    report = sync_schemas(flow, store, MAPPINGS)
    found = record_ids(flow, store, {"orders": "a.orders", "plain": "a.plain"})

    assert report is not None and sorted(s.target_subject for s in report.subjects) == ["a.orders-key", "a.plain-value"]
    assert found is not None and found.framed == {"orders": frozenset({Side.KEY}), "plain": frozenset({Side.VALUE})}
    assert found.derived == {"orders": frozenset({Side.VALUE})}


def test_a_flow_without_registries_has_no_schema_step(tmp_path: Path, store: MetadataStore) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n")
    flow = load_config(config, env={}).flow("a->b")
    assert sync_schemas(flow, store, MAPPINGS) is None
    assert record_ids(flow, store, {"orders": "a.orders"}) is None


def test_a_subject_the_target_refuses_is_reported_and_the_sync_goes_on_with_the_others(
    tmp_path: Path, source: FakeRegistry, target: FakeRegistry, store: MetadataStore
) -> None:
    flow = flow_of(tmp_path, source, target)
    source.add("orders-key", V1)
    source.add("orders-value", V1)
    target.incompatible["a.orders-key"] = "Incompatible artifact"

    report = sync_schemas(flow, store, MAPPINGS)

    assert report is not None and [s.subject for s in report.subjects] == ["orders-value"]
    assert len(report.refused) == 1 and "orders-key v1" in report.refused[0]
    assert report.as_dict()["refused"] == report.refused
    assert [s.subject for s in store.schema_subjects(flow.name)] == ["orders-value"], "tried again next sync"
