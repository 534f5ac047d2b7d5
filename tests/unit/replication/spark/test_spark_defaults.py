"""airmirror's Spark defaults, and a flow's ``airmirror.spark.conf.X`` settings on top of them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from airmirror.replication.spark.defaults import copy_job_conf


def test_defaults_retry_tasks_and_start_workers_from_the_daemon(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no class archive built there
    conf = copy_job_conf()
    assert conf["spark.task.maxFailures"] == "4"
    assert conf["spark.python.daemon.module"] == "airmirror.replication.spark.worker_daemon"
    assert conf["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert conf["spark.ui.enabled"] == "false"


def test_flow_settings_override_the_defaults_and_add_their_own() -> None:
    conf = copy_job_conf({"spark.driver.extraJavaOptions": "-Xmx2g", "spark.executor.memory": "4g"})
    assert conf["spark.driver.extraJavaOptions"] == "-Xmx2g"
    assert conf["spark.executor.memory"] == "4g"
    assert conf["spark.task.maxFailures"] == "4"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_progress_bars_are_off_unless_stderr_is_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert copy_job_conf()["spark.ui.showConsoleProgress"] == "false"
    monkeypatch.setattr("sys.stderr", Terminal())
    assert copy_job_conf()["spark.ui.showConsoleProgress"] == "true"
    assert copy_job_conf({"spark.ui.showConsoleProgress": "false"})["spark.ui.showConsoleProgress"] == "false"
