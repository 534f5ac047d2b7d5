"""What a person sees of ``airmirror replicate`` on their terminal: nothing on stderr when it copied, one line when
it failed.  No PySpark or pandas warning, no Spark or JVM start-up banner.  The command runs as a user runs it,
without the test session's JVM options (the JVM announces those on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records

pytestmark = pytest.mark.integration


def as_a_user(*args: str) -> subprocess.CompletedProcess[str]:
    """``airmirror ARGS`` in a child process with the user's environment (no ``JDK_JAVA_OPTIONS``)."""
    env = {key: value for key, value in os.environ.items() if key != "JDK_JAVA_OPTIONS"}
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", *args], capture_output=True, text=True, timeout=600, env=env
    )


def test_replicate_says_nothing_on_stderr_and_a_failing_one_says_one_line(clusters, prefix: str, tmp_path: Path):
    topic = f"{prefix}.quiet"
    create_topic(clusters["a"].bootstrap, topic)
    records = sample_records(20, prefix)
    produce(clusters["a"].bootstrap, topic, 0, records)
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}\\..*")

    copied = as_a_user("replicate", str(config), "--flow", "a->b")

    assert copied.returncode == 0, copied.stderr
    assert copied.stderr == "", copied.stderr
    assert records_of(clusters["b"].bootstrap, f"a.{topic}", 0) == records

    failed = as_a_user("replicate", str(config), "--flow", "nowhere")
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1 and failed.stderr.startswith("airmirror: error: "), failed.stderr
    assert "nowhere" in failed.stderr
