"""The MM2 config model: flows, precedence, providers, validation and warnings."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from airmirror.config import FlowConfig, MirrorConfig, load_config
from airmirror.config.flow_settings import (
    CheckpointSettings,
    CopySettings,
    DagSettings,
    HeartbeatSettings,
    OffsetSyncSettings,
)
from airmirror.errors import ConfigError
from airmirror.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

THREE_CLUSTERS = "clusters = a, b, c\na.bootstrap.servers = a\nb.bootstrap.servers = b\nc.bootstrap.servers = c\n"
BASE = """\
clusters = a, b
a.bootstrap.servers = a1:9092, a2:9092
b.bootstrap.servers = b1:9092
a->b.enabled = true
"""


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> MirrorConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={} if env is None else env)


def flow(tmp_path: Path, extra: str = "") -> FlowConfig:
    return load(tmp_path, BASE + extra).flow("a->b")


def rejection(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        load(tmp_path, text, env)
    assert error.value.exit_code == 2
    assert error.value.key is not None
    assert f"key '{error.value.key}'" in str(error.value)
    return error.value


def line_of(text: str, key: str) -> int:
    """1-based number of the line of ``text`` that defines ``key``."""
    return next(number for number, line in enumerate(text.splitlines(), 1) if line.split(" = ")[0] == key)


def test_clusters_and_bootstrap(tmp_path: Path) -> None:
    cfg = load(tmp_path, BASE)
    assert cfg.path == tmp_path / "mm2.properties"
    assert cfg.clusters == ("a", "b")
    assert cfg.bootstrap_servers("a") == "a1:9092, a2:9092"
    assert [f.name for f in cfg.enabled_flows()] == ["a->b"]


def test_mm2_defaults(tmp_path: Path) -> None:
    f = flow(tmp_path)
    assert (f.source, f.target, f.name) == ("a", "b", "a->b")
    assert (f.topic_sync.replication_factor, f.topic_sync.sync_configs_enabled, f.topic_sync.sync_acls_enabled) == (
        2,
        True,
        True,
    )
    assert f.heartbeats == HeartbeatSettings(off_by=None, interval_seconds=1, replication_enabled=True)
    assert f.checkpoints == CheckpointSettings(off_by=None, interval_seconds=60, sync_group_offsets_enabled=False)
    assert f.offset_syncs == OffsetSyncSettings(emit_enabled=True, lag_max=100, topic_location="source")
    assert f.copy == CopySettings(None, 500_000, 256 * 1024 * 1024, 60, "reset", 256 * 1024 * 1024)
    assert f.dag == DagSettings(schedule="1m", task_retries=3, live=False)
    assert f.auto_offset_reset == "earliest"
    assert isinstance(f.policy, DefaultReplicationPolicy)
    assert f.get("topics") is None and f.line_of("topics") is None


@pytest.mark.parametrize(
    "key",
    ["refresh.topics.interval.seconds", "refresh.groups.enabled", "sync.group.offsets.interval.seconds", "tasks.max"],
)
def test_mm2_scheduling_keys_without_effect_are_still_validated(tmp_path: Path, key: str) -> None:
    text = BASE + f"a->b.{key} = soon\n"
    with pytest.raises(ConfigError, match=re.escape(key)) as error:
        load(tmp_path, text)
    assert error.value.line == line_of(text, f"a->b.{key}")


def test_default_filters(tmp_path: Path) -> None:
    f = flow(tmp_path)
    assert f.topics.matches("orders")
    for excluded in ("x.internal", "x-internal", "orders.replica", "__consumer_offsets"):
        assert not f.topics.matches(excluded)
    assert f.groups.matches("app")
    for excluded in ("console-consumer-1", "connect-mm2", "__g"):
        assert not f.groups.matches(excluded)
    assert f.is_config_excluded("min.insync.replicas")
    assert f.is_config_excluded("message.timestamp.type")
    assert f.topic_sync.config_properties_exclude.matches("unclean.leader.election.enable")
    assert not f.is_config_excluded("retention.ms")
    assert not flow(tmp_path, "config.properties.exclude = retention\\..*\n").is_config_excluded("min.insync.replicas")


def test_flow_keys_override_top_level_keys(tmp_path: Path) -> None:
    text = BASE + "replication.factor = 3\noffset.lag.max = 10\na->b.replication.factor = 1\ntopics = orders\n"
    f = load(tmp_path, text).flow("a->b")
    assert f.topic_sync.replication_factor == 1
    assert f.get("replication.factor") == "1"
    assert f.line_of("replication.factor") == line_of(text, "a->b.replication.factor")
    assert f.offset_syncs.lag_max == 10
    assert f.line_of("offset.lag.max") == line_of(text, "offset.lag.max")
    assert f.get("missing", "dflt") == "dflt"


def test_topic_selection_and_remote_names(tmp_path: Path) -> None:
    f = flow(tmp_path, "topics = orders.*, pay\ntopics.exclude = orders\\\\.tmp\n")
    assert f.should_replicate("orders")
    assert f.should_replicate("pay")
    assert not f.should_replicate("payments")
    assert not f.should_replicate("orders.tmp")
    assert not f.should_replicate("b.orders")
    assert f.should_replicate("heartbeats")
    assert f.remote_topic("orders") == "a.orders"


def test_custom_separator(tmp_path: Path) -> None:
    f = flow(tmp_path, "replication.policy.separator = _\n")
    assert f.remote_topic("orders") == "a_orders"
    assert f.policy.offset_syncs_topic("b") == "mm2-offset-syncs_b_internal"


def test_enabled_flows_in_file_order(tmp_path: Path) -> None:
    text = THREE_CLUSTERS + "c->a.enabled = TRUE\na->b.enabled = true\nb->c.enabled = false\nb->a.enabled = True\n"
    cfg = load(tmp_path, text)
    assert [f.name for f in cfg.enabled_flows()] == ["c->a", "a->b", "b->a"]


@pytest.mark.parametrize("name", ["b->a", "a->c", "nonsense"])
def test_flow_lookup_of_a_flow_that_is_not_enabled(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as error:
        load(tmp_path, BASE + "b->a.enabled = false\n").flow(name)
    assert error.value.key == f"{name}.enabled"
    assert error.value.exit_code == 2


def test_no_enabled_flow_is_a_warning(tmp_path: Path) -> None:
    cfg = load(tmp_path, BASE.replace("a->b.enabled = true", "a->b.enabled = false"))
    assert cfg.enabled_flows() == []
    assert any("no replication flow" in warning for warning in cfg.warnings)


def test_client_precedence_layers(tmp_path: Path) -> None:
    layers = [
        "ssl.endpoint.identification.algorithm = https",
        "consumer.client.id = top-kind",
        "a.client.id = cluster",
        "a.consumer.client.id = cluster-kind",
        "a->b.consumer.client.id = flow-kind",
        "a->b.source.consumer.client.id = flow-side-kind",
    ]
    for count in range(2, len(layers) + 1):
        f = flow(tmp_path, "\n".join(layers[:count]) + "\n")
        expected = layers[count - 1].split(" = ")[1]
        assert f.source_client("consumer")["client.id"] == expected
    f = flow(tmp_path, "\n".join(layers) + "\n")
    assert f.target_client("consumer")["client.id"] == "flow-kind"
    assert f.source_client("consumer")["ssl.endpoint.identification.algorithm"] == "https"
    assert "client.id" not in f.target_client("producer")


def test_cluster_settings_apply_to_the_kinds_they_belong_to(tmp_path: Path) -> None:
    f = flow(tmp_path, "b.linger.ms = 25\nb.fetch.min.bytes = 10\nb.retries = 4\nproducer.acks = 1\n")
    assert f.target_client("producer") == {
        "bootstrap.servers": "b1:9092",
        "linger.ms": "25",
        "retries": "4",
        "acks": "1",
    }
    assert f.target_client("consumer") == {
        "bootstrap.servers": "b1:9092",
        "fetch.min.bytes": "10",
        "enable.auto.commit": "false",
        "allow.auto.create.topics": "false",
        "auto.offset.reset": "earliest",
    }
    assert f.target_client("admin") == {"bootstrap.servers": "b1:9092", "retries": "4"}
    assert f.source_client("producer") == {"bootstrap.servers": "a1:9092,a2:9092", "acks": "1"}


def test_top_level_security_settings_are_inherited(tmp_path: Path) -> None:
    f = flow(tmp_path, "security.protocol = SASL_SSL\nsasl.mechanism = PLAIN\nb.security.protocol = SSL\n")
    assert f.source_client("admin")["security.protocol"] == "sasl_ssl"
    assert f.target_client("admin")["security.protocol"] == "ssl"
    assert f.target_client("producer")["sasl.mechanisms"] == "PLAIN"


def test_mirror_config_client_config_has_no_flow_overrides(tmp_path: Path) -> None:
    cfg = load(tmp_path, BASE + "a->b.producer.linger.ms = 5\nb.producer.linger.ms = 7\n")
    assert cfg.client_config("b", "producer")["linger.ms"] == "7"
    assert cfg.flow("a->b").target_client("producer")["linger.ms"] == "5"


def test_client_config_of_a_cluster_outside_the_flow(tmp_path: Path) -> None:
    cfg = load(tmp_path, THREE_CLUSTERS + "a->b.enabled = true\n")
    with pytest.raises(ValueError):
        cfg.flow("a->b").client_config("c", "admin")


def test_consumer_defaults_and_auto_offset_reset_override(tmp_path: Path) -> None:
    f = flow(tmp_path, "a.consumer.auto.offset.reset = latest\na.consumer.enable.auto.commit = true\n")
    assert f.auto_offset_reset == "latest"
    assert f.source_client("consumer")["enable.auto.commit"] == "false"
    warnings = load(tmp_path, BASE + "a.consumer.enable.auto.commit = true\n").warnings
    assert any("'a.consumer.enable.auto.commit' (line 5)" in warning for warning in warnings)


def test_consumers_never_create_topics_whatever_the_file_says(tmp_path: Path) -> None:
    f = flow(tmp_path, "consumer.allow.auto.create.topics = true\n")
    assert f.source_client("consumer")["allow.auto.create.topics"] == "false"
    assert f.target_client("consumer")["allow.auto.create.topics"] == "false"
    warnings = load(tmp_path, BASE + "consumer.allow.auto.create.topics = true\n").warnings
    assert any(
        "'consumer.allow.auto.create.topics' (line 5): ignored, airmirror's consumers never create a topic" in warning
        for warning in warnings
    ), warnings


def test_flow_keys_are_not_cluster_keys(tmp_path: Path) -> None:
    cfg = load(tmp_path, BASE + "a->b.topics = orders\n")
    assert cfg.client_config("a", "admin") == {"bootstrap.servers": "a1:9092,a2:9092"}
    assert cfg.flow("a->b").get("topics") == "orders"


def test_mm2_keys_win_over_an_alias_prefix(tmp_path: Path) -> None:
    text = (
        "clusters = sync, b\nsync.bootstrap.servers = s:1\nb.bootstrap.servers = b:1\n"
        "sync->b.enabled = true\nsync.topic.configs.enabled = false\n"
    )
    f = load(tmp_path, text).flow("sync->b")
    assert f.topic_sync.sync_configs_enabled is False
    assert f.source_client("admin") == {"bootstrap.servers": "s:1"}


def test_aliases_with_dots_use_the_longest_prefix(tmp_path: Path) -> None:
    text = (
        "clusters = us, us.west\nus.bootstrap.servers = u:1\nus.west.bootstrap.servers = w:1\n"
        "us.west->us.enabled = true\nus.west->us.replication.factor = 1\n"
    )
    cfg = load(tmp_path, text)
    f = cfg.flow("us.west->us")
    assert (f.source, f.target, f.topic_sync.replication_factor) == ("us.west", "us", 1)
    assert cfg.bootstrap_servers("us.west") == "w:1"


def test_keys_of_undeclared_aliases_are_ignored(tmp_path: Path) -> None:
    cfg = load(tmp_path, BASE + "c.bootstrap.servers = c:1\nc.whatever = 1\n")
    assert cfg.clusters == ("a", "b")


def test_worker_and_java_only_settings_are_warned_about(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        BASE + "b.config.storage.replication.factor = 1\na.producer.buffer.memory = 1\n"
        "linger.ms = 5\nb.replication.factor = 1\na->b.fetch.min.bytes = 1\n",
    )
    for key in (
        "b.config.storage.replication.factor",
        "a.producer.buffer.memory",
        "linger.ms",
        "b.replication.factor",
        "a->b.fetch.min.bytes",
    ):
        assert any(f"'{key}'" in warning for warning in cfg.warnings), key
    assert "buffer.memory" not in cfg.flow("a->b").source_client("producer")


def test_airmirror_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    f = flow(tmp_path)
    assert f.metadata_db_url == f"sqlite:///{tmp_path / '.airmirror'}/metadata.db"
    assert f.spark.master == "local[*]"
    assert f.spark.conf == {}
    assert f.copy.max_records_per_partition is None
    assert f.dag.schedule == "1m"


def test_airmirror_home_from_env(tmp_path: Path) -> None:
    home = tmp_path / "home"
    f = load(tmp_path, BASE, env={"AIRMIRROR_HOME": str(home)}).flow("a->b")
    assert f.metadata_db_url == f"sqlite:///{home}/metadata.db"
    assert os.path.isabs(f.metadata_db_url.removeprefix("sqlite:///"))


def test_airmirror_settings_with_flow_overrides(tmp_path: Path) -> None:
    f = flow(
        tmp_path,
        "airmirror.metadata.db.url = postgresql://db/mm\nairmirror.spark.master = spark://m:7077\n"
        "airmirror.spark.conf.spark.executor.memory = 2g\nairmirror.spark.conf.spark.a = 1\n"
        "a->b.airmirror.spark.conf.spark.a = 2\nairmirror.batch.max.records.per.partition = 5000\n"
        "a->b.airmirror.schedule = 30s\n",
    )
    assert f.metadata_db_url == "postgresql://db/mm"
    assert f.spark.master == "spark://m:7077"
    assert f.spark.conf == {"spark.executor.memory": "2g", "spark.a": "2"}
    assert f.copy.max_records_per_partition == 5000
    assert f.dag.schedule == "30s"


def test_env_and_file_providers(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("user = alice\npassword = p\\u0040ss\n", encoding="utf-8")
    text = BASE + (
        "a.security.protocol = SASL_SSL\na.sasl.mechanism = SCRAM-SHA-256\n"
        "a.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="${{file:{secrets}:user}}" password="${{file:{secrets}:password}}";\n'
        "b.bootstrap.servers = ${env:TARGET_SERVERS}\n"
    )
    cfg = load(tmp_path, text, env={"TARGET_SERVERS": "t1:9092"})
    source = cfg.flow("a->b").source_client("consumer")
    assert (source["sasl.username"], source["sasl.password"]) == ("alice", "p@ss")
    assert cfg.bootstrap_servers("b") == "t1:9092"


def test_provider_values_are_not_resolved_twice(tmp_path: Path) -> None:
    cfg = load(tmp_path, BASE + "a->b.airmirror.schedule = ${env:S}\n", env={"S": "${env:T}"})
    assert cfg.flow("a->b").dag.schedule == "${env:T}"


@pytest.mark.parametrize(
    "reference",
    ["${env:MISSING}", "${file:/no/such/file.properties:key}", "${file:{secrets}:missing}", "${vault:path:key}"],
)
def test_unresolvable_references_name_key_and_line(tmp_path: Path, reference: str) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("present = 1\n", encoding="utf-8")
    text = BASE + f"a.sasl.username.secret = {reference.replace('{secrets}', str(secrets))}\n"
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == ("a.sasl.username.secret", 5)


def test_identity_policy_in_both_directions_warns(tmp_path: Path) -> None:
    text = BASE + "b->a.enabled = true\nreplication.policy.class = IdentityReplicationPolicy\n"
    cfg = load(tmp_path, text)
    assert isinstance(cfg.flow("a->b").policy, IdentityReplicationPolicy)
    assert cfg.flow("a->b").remote_topic("orders") == "orders"
    loops = [warning for warning in cfg.warnings if "IdentityReplicationPolicy" in warning]
    assert len(loops) == 2 and "a->b" in loops[0] and "b->a" in loops[1]


def test_identity_policy_one_way_does_not_warn(tmp_path: Path) -> None:
    policy = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    cfg = load(tmp_path, BASE + f"b->a.enabled = false\nreplication.policy.class = {policy}\n")
    assert not [warning for warning in cfg.warnings if "IdentityReplicationPolicy" in warning]


def test_identity_on_one_leg_of_a_loop_warns(tmp_path: Path) -> None:
    cfg = load(tmp_path, BASE + "b->a.enabled = true\nb->a.replication.policy.class = IdentityReplicationPolicy\n")
    assert [warning for warning in cfg.warnings if "flow b->a uses IdentityReplicationPolicy" in warning]


def test_custom_python_policy(tmp_path: Path) -> None:
    f = flow(
        tmp_path,
        "replication.policy.class = airmirror.mm2.policy:DefaultReplicationPolicy\nreplication.policy.separator = -\n",
    )
    assert f.remote_topic("orders") == "a-orders"


# --- rejections: every one names its key (and line when there is one) ---


def test_missing_clusters(tmp_path: Path) -> None:
    error = rejection(tmp_path, "a.bootstrap.servers = x\n")
    assert (error.key, error.line) == ("clusters", None)


@pytest.mark.parametrize("value", ["", " , ", "a->b, c"])
def test_bad_clusters(tmp_path: Path, value: str) -> None:
    error = rejection(tmp_path, f"# mm2\nclusters = {value}\n")
    assert (error.key, error.line) == ("clusters", 2)


def test_cluster_without_bootstrap_servers(tmp_path: Path) -> None:
    error = rejection(tmp_path, "clusters = a, b\na.bootstrap.servers = x\n")
    assert (error.key, error.line) == ("b.bootstrap.servers", None)
    error = rejection(tmp_path, "clusters = a, b\na.bootstrap.servers = x\nb.bootstrap.servers =\n")
    assert (error.key, error.line) == ("b.bootstrap.servers", 3)


@pytest.mark.parametrize("key", ["a->c.enabled", "c->a.enabled", "a->a.enabled", "c->b.topics", "a->bb.enabled"])
def test_flow_naming_an_undeclared_alias(tmp_path: Path, key: str) -> None:
    error = rejection(tmp_path, BASE + f"{key} = true\n")
    assert (error.key, error.line) == (key, 5)


@pytest.mark.parametrize(
    "key", ["topics", "topics.exclude", "groups", "groups.exclude", "config.properties.exclude", "a->b.topics"]
)
def test_bad_regex(tmp_path: Path, key: str) -> None:
    error = rejection(tmp_path, BASE + f"{key} = ok, [unclosed\n")
    assert (error.key, error.line) == (key, 5)


@pytest.mark.parametrize(
    "key",
    [
        "replication.factor",
        "refresh.topics.interval.seconds",
        "refresh.groups.interval.seconds",
        "emit.heartbeats.interval.seconds",
        "emit.checkpoints.interval.seconds",
        "sync.group.offsets.interval.seconds",
        "sync.topic.configs.interval.seconds",
        "offset.lag.max",
        "checkpoints.topic.replication.factor",
        "tasks.max",
        "airmirror.batch.max.records.per.partition",
        "a->b.replication.factor",
        "a->b.offset.lag.max",
    ],
)
@pytest.mark.parametrize("value", ["ten", "1.5", "", "1_000"])
def test_non_numeric_values(tmp_path: Path, key: str, value: str) -> None:
    error = rejection(tmp_path, BASE + f"{key} = {value}\n")
    assert (error.key, error.line) == (key, 5)


def test_max_records_per_partition_must_be_positive(tmp_path: Path) -> None:
    error = rejection(tmp_path, BASE + "a->b.airmirror.batch.max.records.per.partition = 0\n")
    assert (error.key, error.line) == ("a->b.airmirror.batch.max.records.per.partition", 5)


@pytest.mark.parametrize(
    "key",
    [
        "sync.topic.configs.enabled",
        "emit.heartbeats.enabled",
        "a->b.emit.checkpoints.enabled",
        "sync.group.offsets.enabled",
        "b->a.enabled",
        "a->b.enabled",
        "a->b.airmirror.live",
        "airmirror.live",
    ],
)
@pytest.mark.parametrize("value", ["yes", "maybe", "1", ""])
def test_bad_booleans(tmp_path: Path, key: str, value: str) -> None:
    error = rejection(tmp_path, BASE + f"{key} = {value}\n")
    assert (error.key, error.line) == (key, 5)


def test_live_mode_is_off_by_default_and_set_per_flow_or_for_all(tmp_path: Path) -> None:
    assert flow(tmp_path, "").dag.live is False
    assert flow(tmp_path, "airmirror.live = true\n").dag.live is True
    assert flow(tmp_path, "airmirror.live = true\na->b.airmirror.live = false\n").dag.live is False


def test_booleans_are_case_insensitive(tmp_path: Path) -> None:
    f = flow(tmp_path, "sync.group.offsets.enabled = TRUE\nemit.heartbeats.enabled = False\n")
    assert f.checkpoints.sync_group_offsets_enabled is True
    assert f.heartbeats.enabled is False


@pytest.mark.parametrize("key", ["replication.policy.class", "a->b.replication.policy.class"])
def test_unknown_replication_policy_class(tmp_path: Path, key: str) -> None:
    error = rejection(tmp_path, BASE + f"{key} = com.example.CustomReplicationPolicy\n")
    assert (error.key, error.line) == (key, 5)


def test_empty_separator(tmp_path: Path) -> None:
    error = rejection(tmp_path, BASE + "replication.policy.separator =\n")
    assert (error.key, error.line) == ("replication.policy.separator", 5)


@pytest.mark.parametrize(
    "line",
    ["topic.filter.class = com.example.MyFilter", "offset-syncs.topic.location = elsewhere"],
)
def test_unsupported_mm2_settings(tmp_path: Path, line: str) -> None:
    error = rejection(tmp_path, BASE + f"{line}\n")
    assert (error.key, error.line) == (line.split(" = ")[0], 5)


@pytest.mark.parametrize(
    "key",
    [
        "a.no.such.client.setting",
        "b.producer.no.such.setting",
        "consumer.no.such.setting",
        "a->b.target.admin.no.such.setting",
        "a.ssl.truststore.location",
        "sasl.jaas.config",
        "a.consumer.auto.offset.reset",
    ],
)
def test_untranslatable_client_settings(tmp_path: Path, key: str) -> None:
    oauth = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    value = oauth if key.endswith("jaas.config") else "none"
    error = rejection(tmp_path, BASE + f"{key} = {value}\n")
    assert (error.key, error.line) == (key, 5)


def test_client_settings_of_clusters_without_flows_are_validated(tmp_path: Path) -> None:
    text = THREE_CLUSTERS + "a->b.enabled = true\nc.ssl.keystore.location = /ks.jks\n"
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == ("c.ssl.keystore.location", 6)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "nope.properties", env={})
    assert error.value.exit_code == 2


REPLICATION_FACTOR_KEYS = {
    "replication.factor": 2,
    "heartbeats.topic.replication.factor": 3,
    "checkpoints.topic.replication.factor": 3,
    "offset-syncs.topic.replication.factor": 3,
    "airmirror.batch.log.topic.replication.factor": 3,
}


@pytest.mark.parametrize(("key", "default"), REPLICATION_FACTOR_KEYS.items())
def test_replication_factor_defaults_and_overrides(tmp_path: Path, key: str, default: int) -> None:
    assert flow(tmp_path).topic_replication_factor(key) == default
    assert flow(tmp_path, f"{key} = 5\n").topic_replication_factor(key) == 5
    assert flow(tmp_path, f"{key} = 5\na->b.{key} = -1\n").topic_replication_factor(key) == -1


@pytest.mark.parametrize("key", REPLICATION_FACTOR_KEYS)
@pytest.mark.parametrize("value", ["0", "-2"])
def test_replication_factor_must_be_positive_or_broker_default(tmp_path: Path, key: str, value: str) -> None:
    error = rejection(tmp_path, BASE + f"a->b.{key} = {value}\n")
    assert (error.key, error.line) == (f"a->b.{key}", 5)
    assert "positive" in str(error)


def test_topic_replication_factor_of_another_key_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"offset\.lag\.max"):
        flow(tmp_path).topic_replication_factor("offset.lag.max")


DAG_ID_COLLISIONS = [
    ("us.east, us_east, b", "us.east->b", "us_east->b", "airmirror__us_east__b"),
    ("a__b, c, a, b__c", "a__b->c", "a->b__c", "airmirror__a__b__c"),
    ("x, eu-west.1, eu-west_1", "x->eu-west.1", "x->eu-west_1", "airmirror__x__eu-west_1"),
]


def colliding_config(clusters: str, first: str, second: str) -> str:
    aliases = [alias.strip() for alias in clusters.split(",")]
    servers = "".join(f"{alias}.bootstrap.servers = h:1\n" for alias in aliases)
    return f"clusters = {clusters}\n{servers}{first}.enabled = true\n{second}.enabled = true\n"


@pytest.mark.parametrize(("clusters", "first", "second", "dag_id"), DAG_ID_COLLISIONS)
def test_flows_with_the_same_dag_id_are_rejected(
    tmp_path: Path, clusters: str, first: str, second: str, dag_id: str
) -> None:
    text = colliding_config(clusters, first, second)
    error = rejection(tmp_path, text)
    assert first in str(error) and second in str(error) and dag_id in str(error)
    assert (error.key, error.line) == (f"{second}.enabled", line_of(text, f"{second}.enabled"))


@pytest.mark.parametrize(("clusters", "first", "second", "dag_id"), DAG_ID_COLLISIONS)
def test_validate_exits_2_naming_both_flows(
    tmp_path: Path, capsys, clusters: str, first: str, second: str, dag_id: str
) -> None:
    from airmirror.cli import main

    path = tmp_path / "mm2.properties"
    path.write_text(colliding_config(clusters, first, second))
    assert main(["validate", str(path)]) == 2
    stderr = capsys.readouterr().err
    assert first in stderr and second in stderr and dag_id in stderr


@pytest.mark.parametrize(("clusters", "first", "second", "dag_id"), DAG_ID_COLLISIONS)
def test_one_of_two_colliding_flows_alone_is_accepted(
    tmp_path: Path, clusters: str, first: str, second: str, dag_id: str
) -> None:
    text = colliding_config(clusters, first, second).replace(f"{second}.enabled = true", f"{second}.enabled = false")
    assert [f.name for f in load(tmp_path, text).enabled_flows()] == [first]


def test_flows_with_distinct_dag_ids_are_accepted(tmp_path: Path) -> None:
    text = (
        colliding_config("us.east, b, c", "us.east->b", "b->us.east")
        + "us.east->c.enabled = true\nc->b.enabled = true\n"
    )
    flows = load(tmp_path, text).enabled_flows()
    assert [f.name for f in flows] == ["us.east->b", "b->us.east", "us.east->c", "c->b"]


INTERVAL_TASKS = {  # MM2's interval key -> whether FlowConfig runs its task
    "emit.heartbeats.interval.seconds": lambda f: f.heartbeats.enabled,
    "emit.checkpoints.interval.seconds": lambda f: f.checkpoints.enabled,
    "sync.group.offsets.interval.seconds": lambda f: f.checkpoints.sync_group_offsets_enabled,
    "sync.topic.acls.interval.seconds": lambda f: f.topic_sync.sync_acls_enabled,
    "sync.topic.configs.interval.seconds": lambda f: f.topic_sync.sync_configs_enabled,
}


@pytest.mark.parametrize("key", INTERVAL_TASKS)
def test_a_negative_interval_turns_its_task_off_as_in_mm2(tmp_path: Path, key: str) -> None:
    on = "sync.group.offsets.enabled = true\n"
    assert INTERVAL_TASKS[key](flow(tmp_path, on + f"{key} = 5\n")) is True
    assert INTERVAL_TASKS[key](flow(tmp_path, on + f"{key} = -1\n")) is False
    assert INTERVAL_TASKS[key](flow(tmp_path, on + f"{key} = -1\na->b.{key} = 5\n")) is True


def test_what_turns_emission_off_is_named(tmp_path: Path) -> None:
    negative = flow(tmp_path, "a->b.emit.heartbeats.interval.seconds = -1\nemit.checkpoints.enabled = false\n")
    assert negative.heartbeats.off_by == "emit.heartbeats.interval.seconds is -1 (negative: off, as in MM2)"
    assert negative.heartbeats.interval_seconds == -1
    assert negative.checkpoints.off_by == "emit.checkpoints.enabled is false"
    both = flow(tmp_path, "emit.heartbeats.enabled = false\nemit.heartbeats.interval.seconds = -1\n")
    assert both.heartbeats.off_by == "emit.heartbeats.enabled is false"


@pytest.mark.parametrize(
    "key",
    [
        "emit.heartbeats.interval.seconds",
        "a->b.emit.checkpoints.interval.seconds",
        "sync.group.offsets.interval.seconds",
        "sync.topic.acls.interval.seconds",
        "sync.topic.configs.interval.seconds",
        "refresh.topics.interval.seconds",
        "a->b.refresh.groups.interval.seconds",
    ],
)
def test_a_zero_interval_is_refused_naming_key_and_line(tmp_path: Path, key: str) -> None:
    error = rejection(tmp_path, BASE + f"{key} = 0\n")
    assert (error.key, error.line) == (key, 5)
    assert "negative one to turn this off" in str(error)


def test_validate_exits_2_on_a_zero_interval_naming_key_and_line(tmp_path: Path, capsys) -> None:
    from airmirror.cli import main

    path = tmp_path / "mm2.properties"
    path.write_text(BASE + "a->b.emit.checkpoints.interval.seconds = 0\n")
    assert main(["validate", str(path)]) == 2
    assert "key 'a->b.emit.checkpoints.interval.seconds', line 5: value 0 is not an interval" in capsys.readouterr().err


BATCH_LOG = "airmirror.batch.log.topic.replication.factor"


@pytest.mark.parametrize(
    ("extra", "factor", "origin"),
    [
        ("", 3, (BATCH_LOG, None)),
        ("offset-syncs.topic.replication.factor = 2\n", 2, ("offset-syncs.topic.replication.factor", 5)),
        ("a->b.offset-syncs.topic.replication.factor = 2\n", 2, ("offset-syncs.topic.replication.factor", 5)),
        (
            "b.offset.storage.replication.factor = 1\noffset-syncs.topic.replication.factor = 2\n",
            1,
            ("offset.storage.replication.factor", 5),
        ),
        (
            "b.offset.storage.replication.factor = 2\noffset.storage.replication.factor = 1\n",
            1,
            ("offset.storage.replication.factor", 6),
        ),
        ("offset.storage.replication.factor = -1\n", -1, ("offset.storage.replication.factor", 5)),
        (f"offset.storage.replication.factor = 1\na->b.{BATCH_LOG} = 2\n", 2, (BATCH_LOG, 6)),
    ],
    ids=[
        "defaults",
        "offset-syncs",
        "flow offset-syncs",
        "target worker",
        "top-level worker wins",
        "broker default",
        "own key",
    ],
)
def test_batch_log_factor_falls_back_to_mm2_worker_then_offset_syncs_keys(
    tmp_path: Path, extra: str, factor: int, origin: tuple[str, int | None]
) -> None:
    f = flow(tmp_path, extra)
    assert f.topic_replication_factor(BATCH_LOG) == factor
    assert f.replication_factor_origin(BATCH_LOG) == origin


def test_the_worker_factor_of_another_cluster_is_not_the_targets(tmp_path: Path) -> None:
    assert flow(tmp_path, "a.offset.storage.replication.factor = 1\n").topic_replication_factor(BATCH_LOG) == 3


@pytest.mark.parametrize("key", ["offset.storage.replication.factor", "b.offset.storage.replication.factor"])
def test_the_worker_factor_is_validated_like_the_others(tmp_path: Path, key: str) -> None:
    error = rejection(tmp_path, BASE + f"{key} = 0\n")
    assert (error.key, error.line) == (key, 5)
    assert "positive" in str(error)


def test_worker_keys_airmirror_reads_are_not_reported_as_ignored(tmp_path: Path) -> None:
    warnings = load(
        tmp_path,
        BASE + "b.offset.storage.replication.factor = 1\nb.offset.storage.topic = x\n"
        "b.group.id = g\nb.config.storage.replication.factor = 1\n",
    ).warnings
    assert [w for w in warnings if "worker" in w] == [
        "key 'b.config.storage.replication.factor' (line 8): ignored, Kafka Connect worker setting"
    ]
