"""``airmirror.metadata.retention``: a positive duration, 7 days by default, flow-level beating top-level."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from airmirror.config import load_config
from airmirror.errors import ConfigError

BASE = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"


def retention(tmp_path: Path, extra: str = "") -> timedelta:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra, encoding="utf-8")
    return load_config(path, env={}).flow("a->b").metadata_retention


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
