"""Replication policies, regex filters and MM2's topic-selection rules."""

from __future__ import annotations

import pytest

from airmirror.errors import ConfigError
from airmirror.mm2.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    PatternList,
    RegexFilter,
    ReplicationPolicy,
    is_cycle,
    load_policy,
    should_replicate_topic,
)

ALL_TOPICS = RegexFilter(PatternList.parse(".*", key="topics"), PatternList.parse("", key="topics.exclude"))


class UpperPolicy(DefaultReplicationPolicy):
    """A custom policy referenced by its Python class path from the tests below."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias.upper()}{self.separator}{topic}"


class BrokenPolicy(DefaultReplicationPolicy):
    def __init__(self, separator: str = ".") -> None:
        raise RuntimeError("cannot build")


def regex_filter(include: str, exclude: str = "") -> RegexFilter:
    return RegexFilter(PatternList.parse(include, key="topics"), PatternList.parse(exclude, key="topics.exclude"))


def test_default_policy_names() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("a", "orders") == "a.orders"
    assert policy.topic_source("a.orders") == "a"
    assert policy.upstream_topic("a.orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("orders") is None
    assert policy.original_topic("orders") == "orders"


def test_multi_hop_names() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.topic_source("a.b.orders") == "a"
    assert policy.upstream_topic("a.b.orders") == "b.orders"
    assert policy.original_topic("a.b.orders") == "orders"


def test_trailing_separators_do_not_make_a_remote_topic() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.topic_source("orders.") is None
    assert policy.topic_source(".orders") == ""


def test_custom_separator() -> None:
    policy = DefaultReplicationPolicy("_")
    assert policy.format_remote_topic("a", "my.orders") == "a_my.orders"
    assert policy.topic_source("a_my.orders") == "a"
    assert policy.upstream_topic("a_b_orders") == "b_orders"
    assert policy.offset_syncs_topic("b") == "mm2-offset-syncs_b_internal"
    assert policy.checkpoints_topic("a") == "a_checkpoints_internal"
    assert policy.is_checkpoints_topic("a_checkpoints_internal")
    assert policy.is_internal_topic("mm2-offset-syncs_b_internal")


def test_internal_topic_separator_can_be_disabled() -> None:
    policy = DefaultReplicationPolicy("_", internal_topic_separator_enabled=False)
    assert policy.offset_syncs_topic("b") == "mm2-offset-syncs.b.internal"
    assert policy.checkpoints_topic("a") == "a.checkpoints.internal"
    assert policy.is_checkpoints_topic("a.checkpoints.internal")


def test_internal_topic_names() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.offset_syncs_topic("b") == "mm2-offset-syncs.b.internal"
    assert policy.checkpoints_topic("a") == "a.checkpoints.internal"
    assert policy.is_checkpoints_topic("a.checkpoints.internal")
    assert not policy.is_checkpoints_topic("a.orders")
    assert policy.is_mm2_internal_topic("mm2-offset-syncs.b.internal")


@pytest.mark.parametrize(
    "topic",
    [
        "__consumer_offsets",
        "__transaction_state",
        ".hidden",
        "connect-offsets-internal",
        "x.internal",
        "mm2-offset-syncs.b.internal",
        "a.checkpoints.internal",
        "mm2-configs.a.internal",
    ],
)
def test_internal_topics(topic: str) -> None:
    assert DefaultReplicationPolicy().is_internal_topic(topic)


@pytest.mark.parametrize("topic", ["orders", "a.orders", "internal", "my_internal", "heartbeats"])
def test_regular_topics_are_not_internal(topic: str) -> None:
    assert not DefaultReplicationPolicy().is_internal_topic(topic)


def test_heartbeats_topics_follow_hops() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.is_heartbeats_topic("heartbeats")
    assert policy.is_heartbeats_topic("a.heartbeats")
    assert policy.is_heartbeats_topic("b.a.heartbeats")
    assert not policy.is_heartbeats_topic("myheartbeats")
    assert not policy.is_heartbeats_topic("heartbeats.archive")


def test_cycle_detection() -> None:
    policy = DefaultReplicationPolicy()
    assert is_cycle(policy, "b", "b.orders")
    assert is_cycle(policy, "b", "c.b.orders")
    assert not is_cycle(policy, "b", "orders")
    assert not is_cycle(policy, "b", "c.orders")
    assert not is_cycle(policy, "c", "a.b.orders")


def test_topic_already_from_the_target_is_never_replicated_back() -> None:
    policy = DefaultReplicationPolicy()
    assert not should_replicate_topic(policy, ALL_TOPICS, "a", "b", "b.orders")
    assert should_replicate_topic(policy, ALL_TOPICS, "a", "b", "orders")


def test_multi_hop_replication_is_allowed_but_a_b_a_is_impossible() -> None:
    policy = DefaultReplicationPolicy()
    # b.orders lives on a (replicated b->a); a->c may copy it further as a.b.orders.
    assert should_replicate_topic(policy, ALL_TOPICS, "a", "c", "b.orders")
    assert policy.format_remote_topic("a", "b.orders") == "a.b.orders"
    # a.orders lives on b; b->a would create b.a.orders on a, so a.b.a.orders can never appear.
    assert not should_replicate_topic(policy, ALL_TOPICS, "b", "a", "a.orders")
    # a chain a->b->c->a stops where the name shows it came from a.
    assert not should_replicate_topic(policy, ALL_TOPICS, "c", "a", "b.a.orders")


def test_internal_topics_are_never_replicated_even_when_selected() -> None:
    policy = DefaultReplicationPolicy()
    for topic in ("__consumer_offsets", "mm2-offset-syncs.b.internal", "a.checkpoints.internal", ".hidden"):
        assert not should_replicate_topic(policy, ALL_TOPICS, "a", "b", topic)


def test_heartbeats_are_replicated_even_when_not_selected() -> None:
    policy = DefaultReplicationPolicy()
    only_orders = regex_filter("orders")
    assert should_replicate_topic(policy, only_orders, "a", "b", "heartbeats")
    assert should_replicate_topic(policy, only_orders, "a", "b", "c.heartbeats")
    assert not should_replicate_topic(policy, only_orders, "a", "b", "b.heartbeats")
    assert not should_replicate_topic(policy, only_orders, "a", "b", "payments")
    assert not should_replicate_topic(policy, only_orders, "a", "b", "heartbeats", heartbeats_replication=False)


def test_identity_policy_keeps_names_but_prefixes_heartbeats() -> None:
    policy = IdentityReplicationPolicy()
    assert policy.format_remote_topic("a", "orders") == "orders"
    assert policy.format_remote_topic("a", "heartbeats") == "a.heartbeats"
    assert policy.topic_source("orders") is None
    assert policy.topic_source("a.heartbeats") == "a"
    assert policy.upstream_topic("b.orders") == "b.orders"
    assert policy.original_topic("b.orders") == "b.orders"
    assert policy.original_topic("b.a.heartbeats") == "heartbeats"


def test_identity_policy_cannot_detect_cycles_except_for_heartbeats() -> None:
    policy = IdentityReplicationPolicy(source_cluster_alias="a")
    assert policy.topic_source("orders") == "a"
    assert not is_cycle(policy, "b", "orders")
    assert not is_cycle(policy, "b", "b.orders")
    assert is_cycle(policy, "b", "b.heartbeats")
    assert should_replicate_topic(policy, ALL_TOPICS, "a", "b", "orders")


def test_pattern_list_matches_whole_names() -> None:
    patterns = PatternList.parse(" orders ,pay.* ", key="topics")
    assert patterns.matches("orders")
    assert patterns.matches("payments")
    assert not patterns.matches("orders2")
    assert not patterns.matches("my-orders")


def test_empty_pattern_list_matches_nothing() -> None:
    assert not PatternList.parse("", key="topics").matches("orders")
    assert not PatternList.parse("  ", key="topics").matches("")


def test_regex_filter_excludes_win() -> None:
    topics = regex_filter(".*", r".*\.replica, tmp-.*")
    assert topics.matches("orders")
    assert not topics.matches("orders.replica")
    assert not topics.matches("tmp-1")


def test_bad_regex_names_key_and_line() -> None:
    with pytest.raises(ConfigError) as error:
        PatternList.parse("ok, (unclosed", key="a->b.topics", line=7)
    assert (error.value.key, error.value.line, error.value.exit_code) == ("a->b.topics", 7, 2)
    assert "(unclosed" in str(error.value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", IdentityReplicationPolicy),
        (" IdentityReplicationPolicy ", IdentityReplicationPolicy),
    ],
)
def test_load_built_in_policies(name: str, expected: type[ReplicationPolicy]) -> None:
    policy = load_policy(name, "_")
    assert type(policy) is expected
    assert policy.format_remote_topic("a", "heartbeats") == "a_heartbeats"


def test_load_identity_policy_with_source_alias() -> None:
    policy = load_policy("IdentityReplicationPolicy", ".", source_cluster_alias="a")
    assert policy.topic_source("orders") == "a"


@pytest.mark.parametrize("separator", [".", ":"])
def test_load_custom_python_policy(separator: str) -> None:
    policy = load_policy(f"{__name__}{separator}UpperPolicy", "-")
    assert isinstance(policy, UpperPolicy)
    assert policy.format_remote_topic("a", "orders") == "A-orders"


@pytest.mark.parametrize(
    "name",
    [
        "com.example.MirrorPolicy",
        "NoSuchPolicy",
        "builtins.dict",
        f"{__name__}.Missing",
        f"{__name__}.BrokenPolicy",
        f"{__name__}.regex_filter",
    ],
)
def test_unknown_policies_are_rejected_with_key_and_line(name: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_policy(name, ".", key="a->b.replication.policy.class", line=12)
    assert (error.value.key, error.value.line, error.value.exit_code) == ("a->b.replication.policy.class", 12, 2)
