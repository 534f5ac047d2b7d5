"""``airmirror.task.max.buffer.bytes``: a positive integer of at least 16 MiB, 256 MiB by default, flow-level
beating top-level; anything else is refused naming the key and line (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
def test_zero_negative_and_non_integer_values_are_refused_naming_key_and_line(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(ConfigError) as error:
        buffer_bytes(tmp_path, f"{key} = {value}\n")
    assert error.value.exit_code == 2
    assert (error.value.key, error.value.line) == (key, 5)
    assert f"key '{key}', line 5" in str(error.value)


def test_a_value_below_16_mib_is_refused_saying_the_minimum(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="below 16777216") as error:
        buffer_bytes(tmp_path, f"{KEY} = 16777215\n")
    assert (error.value.key, error.value.exit_code) == (KEY, 2)
