"""The settings registry: each key declared once, every default a value its own parser accepts, FlowConfig's groups
built from it, and undeclared ``airmirror.*`` keys named in a warning."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from airmirror.cli import main
from airmirror.config import load_config
from airmirror.config.properties import Setting
from airmirror.config.setting_types import POSITIVE_INTEGER
from airmirror.config.settings_registry import (
    METADATA_PRUNE_INTERVAL,
    TRANSACTION_MAX_RECORDS,
    Group,
    Origin,
    Scope,
    SettingKey,
    all_keys,
    declared,
    define,
    is_declared,
)
from airmirror.errors import ConfigError

MINIMAL = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"


def flow_of(tmp_path: Path, extra: str = ""):
    path = tmp_path / "mm2.properties"
    path.write_text(MINIMAL + extra)
    config = load_config(path, env={"AIRMIRROR_HOME": str(tmp_path)})
    return config, config.flow("a->b")


def test_every_default_is_a_value_its_own_parser_accepts():
    for key in all_keys():
        key.optional(None)  # raises ConfigError if a declared default were invalid


def test_a_key_is_declared_once():
    with pytest.raises(ValueError, match="declared twice"):
        define(
            SettingKey(
                name=TRANSACTION_MAX_RECORDS.name,
                type=POSITIVE_INTEGER,
                default="1",
                doc="a second declaration",
                group=Group.COPY,
                origin=Origin.AIRMIRROR,
            )
        )


def test_every_airmirror_key_is_airmirrors_and_every_other_key_is_mm2s_or_a_cluster_key():
    for key in all_keys():
        if key.name.startswith("airmirror."):
            assert key.origin is Origin.AIRMIRROR, key.name
        elif key.origin is Origin.AIRMIRROR:
            assert key.scope is Scope.CLUSTER, key.name
            assert key.name == "airflow.conn.id" or key.name.startswith("schema.registry."), key.name


def test_an_unset_flow_takes_every_group_value_from_the_registry_defaults(tmp_path):
    _, flow = flow_of(tmp_path)
    value = lambda name: declared(name).value(None)  # noqa: E731
    assert flow.copy.transaction_max_records == value("airmirror.transaction.max.records")
    assert flow.copy.transaction_max_bytes == value("airmirror.transaction.max.bytes")
    assert flow.copy.transaction_max_seconds == value("airmirror.transaction.max.seconds")
    assert flow.copy.live_transaction_max_ms == value("airmirror.live.transaction.max.ms")
    assert flow.copy.task_max_buffer_bytes == value("airmirror.task.max.buffer.bytes")
    assert flow.copy.source_reset_policy == value("airmirror.source.reset.policy")
    assert flow.copy.max_records_per_partition is None
    assert flow.heartbeats.interval_seconds == value("emit.heartbeats.interval.seconds")
    assert flow.checkpoints.interval_seconds == value("emit.checkpoints.interval.seconds")
    assert flow.offset_syncs.lag_max == value("offset.lag.max")
    assert flow.offset_syncs.topic_location == value("offset-syncs.topic.location")
    assert flow.topic_sync.replication_factor == value("replication.factor")
    assert flow.spark.master == value("airmirror.spark.master")
    assert flow.spark.conn_id == value("airmirror.spark.conn.id")
    assert flow.dag.schedule == value("airmirror.schedule")
    assert flow.dag.task_retries == value("airmirror.task.retries")
    assert flow.metadata_retention == value("airmirror.metadata.retention") == timedelta(days=7)
    assert flow.metadata_db_url == f"sqlite:///{tmp_path}/metadata.db"


def test_a_flow_key_beats_the_top_level_key_and_each_value_is_parsed_by_its_type(tmp_path):
    _, flow = flow_of(
        tmp_path,
        "airmirror.transaction.max.records = 10\na->b.airmirror.transaction.max.records = 20\n"
        "airmirror.metadata.retention = 2h\n",
    )
    assert flow.copy.transaction_max_records == 20
    assert flow.metadata_retention == timedelta(hours=2)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("tasks.max = many", "is not an integer"),
        (
            "a->b.topic.filter.class = com.example.MyFilter",
            "only implements MM2's org.apache.kafka.connect.mirror.DefaultTopicFilter",
        ),
        ("airmirror.live = maybe", "is not true or false"),
        ("airmirror.task.max.buffer.bytes = 1000", "is below 16777216"),
        ("offset-syncs.topic.location = middle", "must be one of source, target"),
        ("replication.policy.separator = ", "must not be empty"),
    ],
)
def test_every_declared_key_is_validated_at_load_naming_key_and_line(tmp_path, line, message):
    with pytest.raises(ConfigError, match=message) as error:
        flow_of(tmp_path, line + "\n")
    assert error.value.key == line.split(" = ")[0] and error.value.line == 5


def test_a_blank_text_value_means_the_default_where_the_key_says_so(tmp_path):
    _, flow = flow_of(tmp_path, "airmirror.spark.master = \n")
    assert flow.spark.master == "local[*]"
    assert declared("airmirror.spark.master").value(Setting("airmirror.spark.master", "  ")) == "local[*]"


def test_an_undeclared_airmirror_key_is_named_in_a_warning_with_the_closest_declared_key(tmp_path):
    config, _ = flow_of(
        tmp_path, "a->b.airmirror.transaction.max.record = 10\nairmirror.spark.conf.spark.ui.enabled = x\n"
    )
    assert config.warnings == [
        "key 'a->b.airmirror.transaction.max.record' (line 5): ignored, airmirror has no such setting "
        "(did you mean 'airmirror.transaction.max.records'?)"
    ]
    assert is_declared("airmirror.spark.conf.spark.ui.enabled")


def retention(tmp_path: Path, extra: str = "") -> timedelta:
    """``airmirror.metadata.retention``: a positive duration, 7 days by default, flow-level beating top-level."""
    return flow_of(tmp_path, extra)[1].metadata_retention


BUFFER_KEY = "airmirror.task.max.buffer.bytes"


def buffer_bytes(tmp_path: Path, extra: str = "") -> int:
    """``airmirror.task.max.buffer.bytes``: at least 16 MiB, 256 MiB by default; the client settings it bounds
    (``fetch.max.bytes``, ``max.partition.fetch.bytes``, ``max.request.size``) must be non-negative integers."""
    return flow_of(tmp_path, extra)[1].copy.task_max_buffer_bytes


def test_seven_days_by_default_and_any_duration_when_set(tmp_path: Path) -> None:
    assert retention(tmp_path) == timedelta(days=7)
    assert retention(tmp_path, "airmirror.metadata.retention = 36h\n") == timedelta(hours=36)
    assert retention(
        tmp_path, "airmirror.metadata.retention = 2d\na->b.airmirror.metadata.retention = 90m\n"
    ) == timedelta(minutes=90)


@pytest.mark.parametrize("value", ["0s", "0d", "-1d", "7", "a week", ""])
def test_a_value_that_is_not_a_positive_duration_is_refused_naming_key_and_line(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as error:
        retention(tmp_path, f"airmirror.metadata.retention = {value}\n")
    assert error.value.exit_code == 2
    assert error.value.key == "airmirror.metadata.retention" and error.value.line == 5
    assert "key 'airmirror.metadata.retention', line 5" in str(error.value)


def test_256_mib_by_default_and_any_integer_from_16_mib_when_set(tmp_path: Path) -> None:
    assert buffer_bytes(tmp_path) == 268_435_456
    assert buffer_bytes(tmp_path, f"{BUFFER_KEY} = 16777216\n") == 16_777_216
    assert buffer_bytes(tmp_path, f"{BUFFER_KEY} = 1073741824\na->b.{BUFFER_KEY} = 67108864\n") == 67_108_864


@pytest.mark.parametrize("key", [BUFFER_KEY, f"a->b.{BUFFER_KEY}"])
@pytest.mark.parametrize("value", ["0", "-268435456", "1.5", "256MB", "ten", "", "1_000_000_000"])
def test_zero_negative_and_non_integer_values_are_refused_naming_key_and_line(
    tmp_path: Path, key: str, value: str
) -> None:
    with pytest.raises(ConfigError) as error:
        buffer_bytes(tmp_path, f"{key} = {value}\n")
    assert error.value.exit_code == 2
    assert (error.value.key, error.value.line) == (key, 5)
    assert f"key '{key}', line 5" in str(error.value)


def test_a_value_below_16_mib_is_refused_saying_the_minimum(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="below 16777216") as error:
        buffer_bytes(tmp_path, f"{BUFFER_KEY} = 16777215\n")
    assert (error.value.key, error.value.exit_code) == (BUFFER_KEY, 2)


BOUNDED_CLIENT_KEYS = [
    "a.consumer.fetch.max.bytes",
    "a.consumer.max.partition.fetch.bytes",
    "consumer.fetch.max.bytes",
    "a.fetch.max.bytes",
    "a->b.source.consumer.max.partition.fetch.bytes",
    "b.producer.max.request.size",
    "producer.max.request.size",
    "a->b.producer.max.request.size",
]


@pytest.mark.parametrize("key", BOUNDED_CLIENT_KEYS)
@pytest.mark.parametrize("value", ["lots", "-1", "1.5", "16MB", "", "1_000"])
def test_a_client_setting_the_buffer_bounds_must_be_a_non_negative_integer(tmp_path: Path, key: str, value: str):
    with pytest.raises(ConfigError, match="is not a non-negative integer") as error:
        buffer_bytes(tmp_path, f"{key} = {value}\n")
    assert (error.value.key, error.value.line, error.value.exit_code) == (key, 5, 2)


@pytest.mark.parametrize("key", BOUNDED_CLIENT_KEYS)
def test_an_integer_client_setting_the_buffer_bounds_loads(tmp_path: Path, key: str) -> None:
    assert buffer_bytes(tmp_path, f"{key} = 1048576\n") == 268_435_456


def test_a_librdkafka_buffer_key_cannot_be_set_in_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown or untranslatable") as error:
        buffer_bytes(tmp_path, "a.consumer.queued.min.messages = 5\n")
    assert (error.value.key, error.value.line) == ("a.consumer.queued.min.messages", 5)


def test_validate_exits_2_naming_a_bad_client_setting_and_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "mm2.properties"
    path.write_text(MINIMAL + "b.producer.max.request.size = 1MB\n", encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    error = capsys.readouterr().err
    assert "key 'b.producer.max.request.size', line 5: value '1MB' is not a non-negative integer" in error


def test_a_setting_read_where_it_is_used_needs_no_group_field(tmp_path):
    assert flow_of(tmp_path)[1].value(METADATA_PRUNE_INTERVAL) == timedelta(minutes=5)
    _, flow = flow_of(tmp_path, "a->b.airmirror.metadata.prune.interval = 1h\n")
    assert flow.value(METADATA_PRUNE_INTERVAL) == timedelta(hours=1)
