"""Every key of an MM2 file honoured, refused or named: legacy aliases, filter classes by full name, config-provider
restrictions, ``emit.offset-syncs.enabled``, a flow's ``source.cluster.``/``target.cluster.`` keys, unused keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airmirror.errors import ConfigError
from tests.unit.config.test_mirror_config import BASE, flow, line_of, load, rejection


@pytest.mark.parametrize(
    ("alias", "key", "excluded", "kept"),
    [
        ("topics.blacklist", "topics", "orders", "x.internal"),
        ("groups.blacklist", "groups", "billing", "__g"),
    ],
)
def test_legacy_blacklist_keys_are_read_as_their_exclude_key_with_a_warning(tmp_path, alias, key, excluded, kept):
    text = BASE + f"a->b.{alias} = {excluded}\n"
    config = load(tmp_path, text)
    selection = getattr(config.flow("a->b"), key)
    assert not selection.matches(excluded)
    assert selection.matches(kept), "the alias replaces the default exclude list, as in MM2"
    [warning] = [w for w in config.warnings if alias in w]
    assert f"line {line_of(text, f'a->b.{alias}')}" in warning and f"'{key}.exclude'" in warning


def test_config_properties_blacklist_is_an_alias_and_the_exclude_key_wins_over_it(tmp_path):
    aliased = flow(tmp_path, "config.properties.blacklist = retention\\..*\n")
    assert aliased.is_config_excluded("retention.ms") and not aliased.is_config_excluded("min.insync.replicas")
    text = BASE + "a->b.topics.blacklist = orders\ntopics.exclude = payments\n"
    config = load(tmp_path, text)
    topics = config.flow("a->b").topics
    assert topics.matches("orders") and not topics.matches("payments")
    assert any("ignored, key 'topics.exclude' (line 6) is set" in w for w in config.warnings)


def test_a_custom_filter_class_named_like_mm2s_is_refused_by_its_full_name(tmp_path):
    text = BASE + "a->b.topic.filter.class = com.acme.mm2.DefaultTopicFilter\n"
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == ("a->b.topic.filter.class", 5)
    assert "com.acme.mm2.DefaultTopicFilter" in str(error)
    assert flow(tmp_path, "group.filter.class = org.apache.kafka.connect.mirror.DefaultGroupFilter\n")


def test_emit_offset_syncs_false_turns_checkpoints_and_group_sync_off_as_mm2(tmp_path):
    f = flow(tmp_path, "a->b.emit.offset-syncs.enabled = false\nsync.group.offsets.enabled = true\n")
    assert f.checkpoints.off_by == "emit.offset-syncs.enabled is false"
    assert not f.checkpoints.sync_group_offsets_enabled
    assert not f.offset_syncs.emit_enabled


def test_a_flows_cluster_keys_override_the_clusters_client_settings(tmp_path):
    text = BASE + (
        "a->b.source.cluster.bootstrap.servers = other-a:9092\n"
        "a->b.target.cluster.security.protocol = SSL\n"
        "a->b.target.cluster.client.id = nope\n"
    )
    config = load(tmp_path, text)
    f = config.flow("a->b")
    assert f.source_client("consumer")["bootstrap.servers"] == "other-a:9092"
    assert f.target_client("producer")["security.protocol"] == "ssl"
    assert f.target_client("producer")["bootstrap.servers"] == "b1:9092"
    assert config.client_config("a", "consumer")["bootstrap.servers"] == "a1:9092,a2:9092"
    [warning] = [w for w in config.warnings if "client.id" in w]
    assert "line 7" in warning and "ignored" in warning


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("a->b.topics.include = orders", "neither MM2 nor airmirror defines this key (did you mean 'topics.exclude'?)"),
        ("foo.bar = 1", "neither MM2 nor airmirror defines this key"),
        ("tasks.max = 4", "not used, Spark spreads partitions over its slots instead"),
        ("a->b.exactly.once.support = required", "not used, airmirror always copies exactly once"),
        ("offset.flush.timeout.ms = 10000", "not used, a Kafka Connect worker setting"),
        ("source.cluster.bootstrap.servers = x:1", "MM2 reads 'source.' keys per flow only"),
        ("a->b.errors.deadletterqueue.topic.name = dlq", "only with errors.tolerance = all"),
        ("a->b.topic.creation.default.partitions = 3", "not used, Kafka Connect's topic creation"),
        ("transforms.x.type = org.apache.kafka.connect.transforms.Filter", "MM2 reads a transform's"),
    ],
)
def test_validate_names_every_key_nothing_reads(tmp_path, line, named):
    text = BASE + line + "\n"
    config = load(tmp_path, text)
    [warning] = [w for w in config.warnings if f"key '{line.split(' = ')[0]}' (line 5)" in w]
    assert named in warning


def test_the_keys_airmirror_reads_are_not_named(tmp_path):
    text = BASE + (
        "topics = orders\na->b.consumer.fetch.min.bytes = 1\na->b.source.consumer.fetch.min.bytes = 2\n"
        "replication.policy.separator = _\nconfig.providers = env\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "a->b.key.converter = org.apache.kafka.connect.converters.ByteArrayConverter\n"
    )
    config = load(tmp_path, text)
    assert [w for w in config.warnings if "converter" not in w] == []


def test_a_converter_other_than_bytes_is_refused(tmp_path):
    error = rejection(tmp_path, BASE + "a->b.value.converter = org.apache.kafka.connect.json.JsonConverter\n")
    assert (error.key, error.line) == ("a->b.value.converter", 5)


def providers(body: str) -> str:
    return (
        "config.providers = file, env\n"
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n" + body
    )


def test_provider_restrictions_are_enforced(tmp_path: Path) -> None:
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    for folder in (allowed, other):
        (folder / "s.properties").write_text("user = u\n")
    restricted = providers(
        f"config.providers.file.param.allowed.paths = {allowed}\n"
        "config.providers.env.param.allowlist.pattern = MM2_.*\n"
    )
    ok = load(
        tmp_path,
        BASE
        + restricted
        + f"a->b.airmirror.schedule = ${{file:{allowed}/s.properties:user}}\n"
        + "a->b.topics = ${env:MM2_TOPICS}\n",
        env={"MM2_TOPICS": "orders"},
    )
    assert ok.flow("a->b").dag.schedule == "u" and ok.flow("a->b").topics.matches("orders")
    text = BASE + restricted + f"a->b.topics = ${{file:{allowed}/../other/s.properties:user}}\n"
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == ("a->b.topics", line_of(text, "a->b.topics")) and "allowed.paths" in str(error)
    text = BASE + restricted + "a->b.topics = ${env:HOME}\n"
    error = rejection(tmp_path, text, env={"HOME": "/root"})
    assert error.key == "a->b.topics" and "allowlist.pattern" in str(error)


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("config.providers.file.param.allowed.paths = relative/path\n", "config.providers.file.param.allowed.paths"),
        ("config.providers.file.param.allowed.paths = /no/such/folder\n", "config.providers.file.param.allowed.paths"),
        ("config.providers.env.class = com.acme.Vault\n", "config.providers.env.class"),
    ],
)
def test_bad_provider_declarations_are_refused(tmp_path, body, key):
    error = rejection(tmp_path, BASE + providers(body))
    assert error.key == key


def test_declared_providers_are_the_only_ones(tmp_path):
    text = (
        BASE
        + "config.providers = env\n"
        + (
            "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
            "a->b.topics = ${file:/etc/hostname:x}\n"
        )
    )
    error = rejection(tmp_path, text)
    assert error.key == "a->b.topics" and "not declared" in str(error)
    with pytest.raises(ConfigError, match=re.escape("has no 'config.providers.vault.class'")):
        load(tmp_path, BASE + "config.providers = vault\n")


def test_the_directory_provider_reads_a_file_of_its_folder(tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "schedule").write_text("5m")
    text = BASE + (
        "config.providers = dir\n"
        "config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n"
        f"a->b.airmirror.schedule = ${{dir:{secrets}:schedule}}\n"
    )
    assert load(tmp_path, text).flow("a->b").dag.schedule == "5m"
