"""``airmirror.task.max.buffer.bytes``: a positive integer of at least 16 MiB, 256 MiB by default, flow-level
beating top-level; anything else is refused naming the key and line (exit 2).  The client settings it bounds
(``fetch.max.bytes``, ``max.partition.fetch.bytes``, ``max.request.size``) must be non-negative integers, checked
at load and by ``airmirror validate``."""

from __future__ import annotations

from pathlib import Path

import pytest

from airmirror.cli import main
from airmirror.config import load_config
from airmirror.errors import ConfigError

BASE = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"
KEY = "airmirror.task.max.buffer.bytes"


def buffer_bytes(tmp_path: Path, extra: str = "") -> int:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra, encoding="utf-8")
    return load_config(path, env={}).flow("a->b").copy.task_max_buffer_bytes


def test_256_mib_by_default_and_any_integer_from_16_mib_when_set(tmp_path: Path) -> None:
    assert buffer_bytes(tmp_path) == 268_435_456
    assert buffer_bytes(tmp_path, f"{KEY} = 16777216\n") == 16_777_216
    assert buffer_bytes(tmp_path, f"{KEY} = 1073741824\na->b.{KEY} = 67108864\n") == 67_108_864


@pytest.mark.parametrize("key", [KEY, f"a->b.{KEY}"])
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
        buffer_bytes(tmp_path, f"{KEY} = 16777215\n")
    assert (error.value.key, error.value.exit_code) == (KEY, 2)


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
    path.write_text(BASE + "b.producer.max.request.size = 1MB\n", encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    error = capsys.readouterr().err
    assert "key 'b.producer.max.request.size', line 5: value '1MB' is not a non-negative integer" in error
