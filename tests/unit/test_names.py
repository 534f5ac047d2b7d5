"""Names airmirror owns: Kafka-side names never collide, DAG ids collide only where names.py says so."""

from __future__ import annotations

from itertools import product

from airmirror import names

TRICKY_ALIASES = ["us", "dr", "eos", "us-dr", "dr-orders", "us.east", "us_east", "a__b", "b__c", "a", "b", "c", "%2D"]
TRICKY_TOPICS = ["orders", "dr-orders", "orders-0", "0"]


def test_docstring_examples() -> None:
    assert names.transactional_id("us", "dr", "dr-orders", 0) == "airmirror-us-dr-dr%2Dorders-0"
    assert names.transactional_id("us-dr", "dr", "orders", 0) == "airmirror-us%2Ddr-dr-orders-0"


def test_plain_parts_read_as_they_are() -> None:
    assert names.transactional_id("us.east", "dr_1", "orders.v2", 3) == "airmirror-us.east-dr_1-orders.v2-3"
    assert names.anchor_group("a", "b") == "airmirror-eos-a-b"
    assert names.source_progress_group("a", "b") == "airmirror-a-b"


def test_transactional_ids_never_collide() -> None:
    keys = list(product(TRICKY_ALIASES, TRICKY_ALIASES, TRICKY_TOPICS, [0, 1, 10]))
    ids = {names.transactional_id(*key) for key in keys}
    assert len(ids) == len(keys)


def test_groups_never_collide() -> None:
    pairs = list(product(TRICKY_ALIASES, TRICKY_ALIASES))
    anchors = {names.anchor_group(*pair) for pair in pairs}
    progress = {names.source_progress_group(*pair) for pair in pairs}
    assert len(anchors) == len(progress) == len(pairs)
    assert not anchors & progress


def test_batch_log_topics_differ_by_source() -> None:
    topics = {names.batch_log_topic(alias) for alias in TRICKY_ALIASES}
    assert len(topics) == len(TRICKY_ALIASES)
    assert names.batch_log_topic("us") == "airmirror-batches.us.internal"


def test_dag_ids_keep_aliases_readable() -> None:
    assert names.dag_id("us.east", "eu-west") == "airmirror__us_east__eu-west"
    assert names.dag_id("a", "b") == "airmirror__a__b"


def test_dag_ids_that_collide() -> None:
    assert names.dag_id("us.east", "b") == names.dag_id("us_east", "b")
    assert names.dag_id("a__b", "c") == names.dag_id("a", "b__c")
